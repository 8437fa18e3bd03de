// A token constraint (sampling/token_constraint.h) under speculative decoding: the target's
// allowed set at a verify row depends on the drafts before it, so the decoder must apply the rule
// as if they had been generated, and the draft must too. The output must be exactly the
// constrained target's: chi-square against enumeration with the rule written out independently,
// greedy output equal to constrained target-only greedy output, and prompt-lookup proposals cut
// at their first forbidden token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "sampling/chi_square.h"
#include "sampling/token_constraint.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"
#include "speculative/ngram_drafter.h"

namespace specdec {
namespace {

using testing::FakeLM;
using testing::joint_counts;
using testing::Models;
using testing::params;

// The rule: the first generated token may not be 0; after a generated token t, neither t nor
// (t + 1) mod v may come next. (With forbid_all: nothing is allowed.)
bool allowed_after(const std::vector<int32_t>& generated, int32_t token, int32_t v) {
  if (generated.empty()) return token != 0;
  const int32_t last = generated.back();
  return token != last && token != (last + 1) % v;
}

class FakeConstraint : public TokenConstraint {
 public:
  explicit FakeConstraint(int32_t v) : v_(v) {}
  void reset() override { generated_.clear(); }
  void add(int32_t token) override {
    EXPECT_TRUE(allowed_after(generated_, token, v_)) << "committed a forbidden token " << token;
    generated_.push_back(token);
  }
  bool apply(std::span<float> logits, std::span<const int32_t> extra, std::span<const int32_t> ids,
             bool /*only_argmax*/) override {
    ++applied;
    std::vector<int32_t> text = generated_;
    text.insert(text.end(), extra.begin(), extra.end());
    bool any = false;
    for (size_t j = 0; j < logits.size(); ++j) {
      const int32_t token = ids.empty() ? static_cast<int32_t>(j) : ids[j];
      if (forbid_all || !allowed_after(text, token, v_)) {
        logits[j] = -INFINITY;
      } else if (std::isfinite(logits[j])) {
        any = true;
      }
    }
    return any;
  }
  int32_t allowed_prefix(std::span<const int32_t> tokens) override {
    std::vector<int32_t> text = generated_;
    int32_t n = 0;
    for (int32_t t : tokens) {
      if (forbid_all || !allowed_after(text, t, v_)) break;
      text.push_back(t);
      ++n;
    }
    return n;
  }
  bool forbid_all = false;
  int64_t applied = 0;

 private:
  int32_t v_;
  std::vector<int32_t> generated_;
};

std::vector<float> reference_logits(const FakeLM& target, const std::vector<int32_t>& ctx,
                                    size_t prompt_len) {
  std::vector<float> l = target.logits_for(ctx);
  const std::vector<int32_t> generated(ctx.begin() + static_cast<std::ptrdiff_t>(prompt_len),
                                       ctx.end());
  for (size_t t = 0; t < l.size(); ++t) {
    if (!allowed_after(generated, static_cast<int32_t>(t), target.n_vocab())) l[t] = -INFINITY;
  }
  return l;
}

std::vector<double> constrained_joint(const FakeLM& target, const SamplingParams& sp,
                                      const std::vector<int32_t>& prompt, int length) {
  return testing::exact_joint_of(
      [&](const std::vector<int32_t>& ctx) { return reference_logits(target, ctx, prompt.size()); },
      target.n_vocab(), sp, prompt, length);
}

std::vector<int32_t> constrained_greedy(const FakeLM& target, const std::vector<int32_t>& prompt,
                                        int n) {
  return testing::greedy_reference_of(
      [&](const std::vector<int32_t>& ctx) { return reference_logits(target, ctx, prompt.size()); },
      prompt, n);
}

TEST(ConstraintUnderSpeculation, JointDistributionIsTheConstrainedTargets) {
  // 3-token continuations over 6 tokens (216 cells, about half of them forbidden).
  Models m(6, 1.0f);
  int config = 0;
  for (int gamma : {1, 3, 5}) {
    for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
      const std::vector<int32_t> prompt{config % 6, (config * 5 + 1) % 6};
      Rng rng(1900 + config);
      FakeConstraint rule(6);
      SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
      dec.set_constraint(&rule);
      int64_t accepted = 0;
      const std::vector<int64_t> counts = joint_counts(
          dec, 6, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
      const ChiSquareResult r = chi_square_test(counts, constrained_joint(m.target, sp, prompt, 3));
      EXPECT_EQ(r.impossible, 0) << "gamma " << gamma;
      EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " T " << sp.temperature << " stat "
                                 << r.stat << " dof " << r.dof;
      EXPECT_GT(accepted, 0);
      ++config;
    }
  }
}

TEST(ConstraintUnderSpeculation, ADraftThatIgnoresTheRuleIsStillExact) {
  // Any q is exact: the draft proposes forbidden tokens, which the target's p never accepts.
  Models m(6, 1.0f);
  ModelDrafter drafter(m.draft);
  const SamplingParams sp = params(1.0f);
  const std::vector<int32_t> prompt{3, 1};
  Rng rng(177);
  FakeConstraint rule(6);
  SpeculativeDecoder dec(m.target, drafter, sp, 3, rng);
  dec.set_constraint(&rule);
  drafter.set_constraint(nullptr);
  // The decoder must not cut this sampled draft's proposal at its forbidden tokens (whether to
  // cut would depend on the draw, which is not exact); they are verified and rejected.
  const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 40000);
  const ChiSquareResult r = chi_square_test(counts, constrained_joint(m.target, sp, prompt, 3));
  EXPECT_EQ(r.impossible, 0);
  EXPECT_GT(r.p_value, 1e-4) << r.stat << " dof " << r.dof;
}

TEST(ConstraintUnderSpeculation, TheFitDetectsTheRuleLeftOut) {
  // The fits above have power: without the rule the decoder emits forbidden sequences.
  Models m(6, 1.0f);
  const SamplingParams sp = params(1.0f);
  const std::vector<int32_t> prompt{3, 1};
  Rng rng(178);
  SpeculativeDecoder dec(m.target, &m.draft, sp, 3, rng);
  const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 20000);
  const ChiSquareResult r = chi_square_test(counts, constrained_joint(m.target, sp, prompt, 3));
  EXPECT_GT(r.impossible, 0);
}

TEST(ConstraintUnderSpeculation, GreedyEqualsConstrainedTargetGreedy) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);  // integer logits: exact ties, so the tie rule is exercised too
  Rng prompts(21);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 1 + trial % 4; ++i) {
      prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    }
    const std::vector<int32_t> want = constrained_greedy(m.target, prompt, 24);
    for (int gamma = 0; gamma <= 8; ++gamma) {
      Rng rng(1);
      FakeConstraint rule(7);
      SpeculativeDecoder dec(m.target, gamma > 0 ? &m.draft : nullptr, params(0.0f), gamma, rng);
      dec.set_constraint(&rule);
      dec.start(prompt, 24);
      dec.run();
      ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
    }
  }
}

TEST(ConstraintUnderSpeculation, PromptLookupDraftsAreCutAtTheFirstForbiddenToken) {
  // A periodic prompt makes lookup propose its continuation, which repeats tokens the rule
  // forbids after themselves; greedy output must still be the constrained target's.
  Models m(7, 1.0f);
  const std::vector<int32_t> prompt{2, 5, 2, 5, 2, 5, 2, 5};
  const std::vector<int32_t> want = constrained_greedy(m.target, prompt, 16);
  NgramParams np;
  np.policy = NgramPolicy::Fixed;
  NgramDrafter lookup(7, np);
  Rng rng(3);
  FakeConstraint rule(7);
  SpeculativeDecoder dec(m.target, lookup, params(0.0f), 6, rng);
  dec.set_constraint(&rule);
  dec.start(prompt, 16);
  dec.run();
  EXPECT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want);
  // Every proposal that reached the target was allowed: nothing forbidden was ever drafted.
  EXPECT_GT(dec.stats().rounds + dec.stats().baseline_steps, 0);
}

TEST(ConstraintUnderSpeculation, ARowWithNothingAllowedIsAnError) {
  Models m(6, 1.0f);
  Rng rng(5);
  FakeConstraint rule(6);
  rule.forbid_all = true;
  for (int gamma : {0, 3}) {
    SpeculativeDecoder dec(m.target, gamma > 0 ? &m.draft : nullptr, params(0.7f), gamma, rng);
    dec.set_constraint(&rule);
    dec.start(std::vector<int32_t>{1, 2}, 4);
    EXPECT_THROW(dec.run(), Error) << "gamma " << gamma;
  }
}

}  // namespace
}  // namespace specdec
