// Penalties and logit bias under speculative decoding: the target's distribution at a verify row
// depends on the drafts before it, so the decoder must count them (SpeculativeDecoder::
// set_penalties). The output must be exactly the penalized target's: chi-square against
// enumeration with an independent implementation of the penalties, and greedy output equal to
// penalized target-only greedy output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sampling/chi_square.h"
#include "sampling/penalties.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::FakeLM;
using testing::joint_counts;
using testing::Models;
using testing::params;

// The penalized logits after ctx = prompt + generated, written out from the definitions
// (sampling/penalties.h) rather than through TokenPenalties.
std::vector<float> reference_logits(const FakeLM& target, const PenaltyParams& pp,
                                    const std::vector<int32_t>& ctx, size_t prompt_len) {
  std::vector<float> l = target.logits_for(ctx);
  if (pp.last_n >= 0) {
    // llama.cpp's rule: all three count the last last_n tokens of prompt and text.
    const size_t n = std::min(ctx.size(), static_cast<size_t>(pp.last_n));
    for (size_t t = 0; t < l.size(); ++t) {
      const auto id = static_cast<int32_t>(t);
      const auto count = std::count(ctx.end() - static_cast<std::ptrdiff_t>(n), ctx.end(), id);
      for (const auto& [token, bias] : pp.logit_bias) {
        if (token == id) l[t] += bias;
      }
      if (count > 0) {
        if (pp.repetition_penalty != 1.0f) {
          l[t] = l[t] > 0 ? l[t] / pp.repetition_penalty : l[t] * pp.repetition_penalty;
        }
        l[t] -= pp.frequency_penalty * static_cast<float>(count);
        l[t] -= pp.presence_penalty;
      }
    }
    return l;
  }
  for (size_t t = 0; t < l.size(); ++t) {
    const auto id = static_cast<int32_t>(t);
    const auto generated =
        std::count(ctx.begin() + static_cast<std::ptrdiff_t>(prompt_len), ctx.end(), id);
    const bool in_prompt =
        std::find(ctx.begin(), ctx.begin() + static_cast<std::ptrdiff_t>(prompt_len), id) !=
        ctx.begin() + static_cast<std::ptrdiff_t>(prompt_len);
    for (const auto& [token, bias] : pp.logit_bias) {
      if (token == id) l[t] += bias;
    }
    if (pp.repetition_penalty != 1.0f && (in_prompt || generated > 0)) {
      l[t] = l[t] > 0 ? l[t] / pp.repetition_penalty : l[t] * pp.repetition_penalty;
    }
    if (generated > 0) {
      l[t] -= pp.frequency_penalty * static_cast<float>(generated);
      l[t] -= pp.presence_penalty;
    }
  }
  // min_tokens: what would end the text is impossible until enough was generated.
  if (ctx.size() - prompt_len < static_cast<size_t>(pp.min_tokens)) {
    for (int32_t id : pp.min_tokens_ids) l[static_cast<size_t>(id)] = -INFINITY;
  }
  return l;
}

std::vector<double> penalized_joint(const FakeLM& target, const SamplingParams& sp,
                                    const PenaltyParams& pp, const std::vector<int32_t>& prompt,
                                    int length) {
  return testing::exact_joint_of(
      [&](const std::vector<int32_t>& ctx) {
        return reference_logits(target, pp, ctx, prompt.size());
      },
      target.n_vocab(), sp, prompt, length);
}

// Strong enough that the penalized joint is far from the plain one (see the last test).
PenaltyParams strong_penalties() {
  PenaltyParams pp;
  pp.repetition_penalty = 1.6f;
  pp.presence_penalty = 0.7f;
  pp.frequency_penalty = 0.5f;
  pp.logit_bias = {{2, 1.5f}, {4, -100.0f}};
  return pp;
}

TEST(PenaltiesUnderSpeculation, JointDistributionIsThePenalizedTargets) {
  // 3-token continuations over 6 tokens (216 cells), level 1e-4 per fit.
  Models m(6, 1.0f);
  const PenaltyParams pp = strong_penalties();
  int config = 0;
  for (int gamma : {1, 3, 5}) {
    for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
      const std::vector<int32_t> prompt{config % 6, (config * 5 + 1) % 6};
      Rng rng(900 + config);
      SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
      dec.set_penalties(pp);
      int64_t accepted = 0;
      const std::vector<int64_t> counts = joint_counts(
          dec, 6, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
      const ChiSquareResult r =
          chi_square_test(counts, penalized_joint(m.target, sp, pp, prompt, 3));
      EXPECT_EQ(r.impossible, 0) << "gamma " << gamma;
      EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " T " << sp.temperature << " stat "
                                 << r.stat << " dof " << r.dof;
      EXPECT_GT(accepted, 0);
      ++config;
    }
  }
}

// llama.cpp's window (repeat_last_n): a verify row's window holds the drafts before it and drops
// as many of the oldest tokens, so it slides within a round.
TEST(PenaltiesUnderSpeculation, AWindowOfTheLastTokensIsExact) {
  Models m(6, 1.0f);
  int config = 0;
  for (int32_t last_n : {1, 2, 3}) {
    PenaltyParams pp = strong_penalties();
    pp.last_n = last_n;
    const SamplingParams sp = params(1.0f);
    const std::vector<int32_t> prompt{config % 6, (config * 5 + 1) % 6, 3};
    Rng rng(1300 + config);
    SpeculativeDecoder dec(m.target, &m.draft, sp, 3, rng);
    dec.set_penalties(pp);
    const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 40000);
    const ChiSquareResult r = chi_square_test(counts, penalized_joint(m.target, sp, pp, prompt, 3));
    EXPECT_EQ(r.impossible, 0) << "last_n " << last_n;
    EXPECT_GT(r.p_value, 1e-4) << "last_n " << last_n << " stat " << r.stat << " dof " << r.dof;
    // The window mattered: OpenAI's rule (the whole text) does not fit the counts.
    PenaltyParams whole = pp;
    whole.last_n = -1;
    EXPECT_LT(chi_square_test(counts, penalized_joint(m.target, sp, whole, prompt, 3)).p_value,
              1e-6)
        << "last_n " << last_n;
    ++config;
  }
}

// min_tokens holds tokens back at the first positions only: a verify row's position counts the
// round's drafts before it, so the rows past min_tokens may take them.
TEST(PenaltiesUnderSpeculation, MinTokensHoldsBackExactlyTheFirstPositions) {
  Models m(6, 1.0f);
  PenaltyParams pp;
  pp.min_tokens = 2;
  pp.min_tokens_ids = {1, 4};
  pp.frequency_penalty = 0.3f;
  int config = 0;
  for (int gamma : {1, 3, 5}) {
    const SamplingParams sp = params(1.0f);
    const std::vector<int32_t> prompt{config % 6, 2};
    Rng rng(950 + config);
    SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
    dec.set_penalties(pp);
    const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 40000);
    const ChiSquareResult r = chi_square_test(counts, penalized_joint(m.target, sp, pp, prompt, 3));
    EXPECT_EQ(r.impossible, 0) << "gamma " << gamma;
    EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " stat " << r.stat << " dof " << r.dof;
    // The held-back tokens do come at the third position.
    int64_t third = 0;
    for (size_t cell = 0; cell < counts.size(); ++cell) {
      if (cell % 6 == 1 || cell % 6 == 4) third += counts[cell];
    }
    EXPECT_GT(third, 0);
    ++config;
  }
}

TEST(PenaltiesUnderSpeculation, ADraftThatIgnoresThePenaltiesIsStillExact) {
  // Any q is exact: strip the penalties from the draft after the decoder handed them over.
  Models m(6, 1.0f);
  const PenaltyParams pp = strong_penalties();
  ModelDrafter drafter(m.draft);
  const SamplingParams sp = params(1.0f);
  const std::vector<int32_t> prompt{3, 1};
  Rng rng(77);
  SpeculativeDecoder dec(m.target, drafter, sp, 3, rng);
  dec.set_penalties(pp);
  drafter.set_penalties(nullptr);
  const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 40000);
  const ChiSquareResult r = chi_square_test(counts, penalized_joint(m.target, sp, pp, prompt, 3));
  EXPECT_EQ(r.impossible, 0);
  EXPECT_GT(r.p_value, 1e-4) << r.stat << " dof " << r.dof;
}

TEST(PenaltiesUnderSpeculation, TheFitDetectsPenaltiesLeftOut) {
  // The test above has power: without set_penalties the same fit fails.
  Models m(6, 1.0f);
  const PenaltyParams pp = strong_penalties();
  const SamplingParams sp = params(1.0f);
  const std::vector<int32_t> prompt{3, 1};
  Rng rng(78);
  SpeculativeDecoder dec(m.target, &m.draft, sp, 3, rng);
  const std::vector<int64_t> counts = joint_counts(dec, 6, prompt, 3, 40000);
  const ChiSquareResult r = chi_square_test(counts, penalized_joint(m.target, sp, pp, prompt, 3));
  EXPECT_TRUE(r.impossible > 0 || r.p_value < 1e-6) << r.stat;
}

TEST(PenaltiesUnderSpeculation, GreedyEqualsPenalizedTargetGreedy) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);  // integer logits: exact ties, so the tie rule is exercised too
  PenaltyParams pp;
  pp.repetition_penalty = 1.25f;
  pp.frequency_penalty = 1.0f;
  pp.logit_bias = {{5, 2.0f}};
  pp.min_tokens = 6;  // the favoured token 5 only from the seventh token on
  pp.min_tokens_ids = {5};
  Rng prompts(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 1 + trial % 4; ++i) {
      prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    }
    const std::vector<int32_t> want = testing::greedy_reference_of(
        [&](const std::vector<int32_t>& ctx) {
          return reference_logits(m.target, pp, ctx, prompt.size());
        },
        prompt, 24);
    for (int gamma = 0; gamma <= 8; ++gamma) {
      Rng rng(1);
      SpeculativeDecoder dec(m.target, gamma > 0 ? &m.draft : nullptr, params(0.0f), gamma, rng);
      dec.set_penalties(pp);
      dec.start(prompt, 24);
      dec.run();
      ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
    }
  }
}

}  // namespace
}  // namespace specdec
