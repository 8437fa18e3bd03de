// Mirostat under speculation: a row's distribution depends on mu, which depends on every token
// before it, so the target's verify rows are built at the mu their drafts leave and the
// committed text moves mu as target-only sampling would. The speculative output must be exactly
// Mirostat's (chi-square against enumeration with mu carried along each continuation), and
// greedy output the target's argmax.
#include <gtest/gtest.h>

#include "sampling/chi_square.h"
#include "sampling/mirostat.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::FakeLM;
using testing::joint_counts;
using testing::Models;
using testing::params;

SamplingParams mirostat(int version, float t, float tau, float eta) {
  SamplingParams sp = params(t, 0.5f, 2, 0.3f);  // filters Mirostat must ignore
  sp.mirostat = version;
  sp.mirostat_tau = tau;
  sp.mirostat_eta = eta;
  return sp;
}

// P(continuation) for every continuation of `length` tokens under target-only Mirostat: each
// branch of the enumeration carries its own mu.
std::vector<double> exact_mirostat_joint(const FakeLM& target, const SamplingParams& sp,
                                         const std::vector<int32_t>& prompt, int length) {
  const int32_t v = target.n_vocab();
  std::vector<double> out(static_cast<size_t>(std::pow(v, length)), 0.0);
  const auto recurse = [&](auto&& self, std::vector<int32_t>& ctx, float mu, int depth, double prob,
                           size_t index) -> void {
    if (depth == length) {
      out[index] = prob;
      return;
    }
    SamplingParams row = sp;
    row.mirostat_mu = mu;
    Distribution d;
    make_distribution(target.logits_for(ctx), row, d);
    for (size_t i = 0; i < d.size(); ++i) {
      ctx.push_back(d.ids[i]);
      self(self, ctx, mirostat_next_mu(row, d.probs[i]), depth + 1, prob * d.probs[i],
           index * static_cast<size_t>(v) + static_cast<size_t>(d.ids[i]));
      ctx.pop_back();
    }
  };
  std::vector<int32_t> ctx = prompt;
  recurse(recurse, ctx, 2.0f * sp.mirostat_tau, 0, 1.0, 0);
  return out;
}

// 3-token continuations over 5 tokens (125 cells), γ 3, 40,000 runs each; level 1e-4 per fit.
TEST(MirostatUnderSpeculation, JointDistributionIsMirostats) {
  Models m(5, 1.0f);
  int config = 0;
  for (const SamplingParams& sp : {mirostat(2, 1.0f, 1.2f, 0.8f), mirostat(2, 0.7f, 0.8f, 1.0f),
                                   mirostat(1, 1.0f, 1.5f, 1.0f), mirostat(1, 1.3f, 0.9f, 0.6f)}) {
    const std::vector<int32_t> prompt{config % 5, 2, (config * 3) % 5};
    ModelDrafter drafter(m.draft);
    Rng rng(7300 + config);
    SpeculativeDecoder dec(m.target, drafter, sp, 3, rng);
    int64_t accepted = 0;
    const std::vector<int64_t> counts = joint_counts(
        dec, 5, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
    const ChiSquareResult r =
        chi_square_test(counts, exact_mirostat_joint(m.target, sp, prompt, 3));
    EXPECT_EQ(r.impossible, 0) << "config " << config;
    EXPECT_GT(r.p_value, 1e-4) << "config " << config << " stat " << r.stat << " dof " << r.dof;
    EXPECT_GT(accepted, 0) << "config " << config;
    // mu really moved: the joint with mu frozen at its start (eta 0) does not fit the counts.
    SamplingParams frozen = sp;
    frozen.mirostat_eta = 0.0f;
    EXPECT_LT(chi_square_test(counts, exact_mirostat_joint(m.target, frozen, prompt, 3)).p_value,
              1e-6)
        << "config " << config;
    ++config;
  }
}

TEST(MirostatUnderSpeculation, GreedyIgnoresMirostatAndEqualsTargetGreedy) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);
  for (int version : {1, 2}) {
    EXPECT_EQ(testing::expect_greedy_is_target_greedy(m, mirostat(version, 0.0f, 0.1f, 5.0f), 4), 0)
        << "version " << version;
  }
}

}  // namespace
}  // namespace specdec
