// DRY under speculative decoding: the penalty at a verify row depends on the whole text before
// it, the round's drafts included, so the decoder must count them (TokenPenalties::apply's
// `extra`). The output must be exactly the DRY-penalized target's: chi-square against
// enumeration, and greedy output equal to penalized target-only greedy output.
#include <gtest/gtest.h>

#include <algorithm>

#include "sampling/chi_square.h"
#include "sampling/penalties.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint_of;
using testing::FakeLM;
using testing::greedy_reference_of;
using testing::joint_counts;
using testing::Models;
using testing::params;

// Runs of one token already count and the penalty is steep, so that 3 tokens of continuation
// after a prompt that repeats itself are far from the plain target's.
PenaltyParams strong_dry(int32_t last_n = -1) {
  PenaltyParams pp;
  pp.dry.multiplier = 1.5f;
  pp.dry.base = 2.0f;
  pp.dry.allowed_length = 1;
  pp.dry.penalty_last_n = last_n;
  pp.dry_breakers = {{5, {}}};
  return pp;
}

// The target's logits after ctx minus DRY's penalties over its last penalty_last_n tokens.
std::vector<float> dry_logits(const FakeLM& target, const PenaltyParams& pp,
                              const std::vector<int32_t>& ctx) {
  std::vector<float> l = target.logits_for(ctx);
  const size_t n =
      pp.dry.penalty_last_n < 0 ? ctx.size() : std::min(ctx.size(), size_t(pp.dry.penalty_last_n));
  std::vector<std::pair<int32_t, float>> amounts;
  dry_penalties(pp.dry, pp.dry_breakers, std::span<const int32_t>(ctx).subspan(ctx.size() - n),
                amounts);
  for (const auto& [t, a] : amounts) l[static_cast<size_t>(t)] -= a;
  return l;
}

TEST(DryUnderSpeculation, JointDistributionIsThePenalizedTargets) {
  // 3-token continuations over 6 tokens (216 cells), level 1e-4 per fit.
  Models m(6, 1.0f);
  int config = 0;
  for (int32_t last_n : {-1, 4}) {
    for (int gamma : {1, 4}) {
      const PenaltyParams pp = strong_dry(last_n);
      const SamplingParams sp = params(1.0f);
      const std::vector<int32_t> prompt{config % 5, 2, 3, config % 5, 2};
      Rng rng(4400 + config);
      SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
      dec.set_penalties(pp);
      int64_t accepted = 0;
      const std::vector<int64_t> counts = joint_counts(
          dec, 6, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
      const auto logits = [&](const std::vector<int32_t>& ctx) {
        return dry_logits(m.target, pp, ctx);
      };
      const ChiSquareResult r = chi_square_test(counts, exact_joint_of(logits, 6, sp, prompt, 3));
      EXPECT_EQ(r.impossible, 0) << "config " << config;
      EXPECT_GT(r.p_value, 1e-4) << "config " << config << " stat " << r.stat << " dof " << r.dof;
      EXPECT_GT(accepted, 0);
      // Without DRY the counts do not fit: the test can tell.
      EXPECT_LT(chi_square_test(counts, testing::exact_joint(m.target, sp, prompt, 3)).p_value,
                1e-6)
          << "config " << config;
      ++config;
    }
  }
}

TEST(DryUnderSpeculation, GreedyEqualsPenalizedTargetGreedy) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);
  const PenaltyParams pp = strong_dry();
  int changed = 0;  // trials whose text DRY changed
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<int32_t> prompt{trial % 7, 1, 2, trial % 7, 1};
    Rng rng(17 + trial);
    SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), 4, rng);
    dec.set_penalties(pp);
    dec.start(prompt, 24);
    dec.run();
    const std::vector<int32_t> got(dec.generated().begin(), dec.generated().end());
    const auto logits = [&](const std::vector<int32_t>& ctx) {
      return dry_logits(m.target, pp, ctx);
    };
    EXPECT_EQ(got, greedy_reference_of(logits, prompt, 24)) << "trial " << trial;
    changed += got != testing::greedy_reference(m.target, prompt, 24) ? 1 : 0;
  }
  EXPECT_GT(changed, 0);
}

}  // namespace
}  // namespace specdec
