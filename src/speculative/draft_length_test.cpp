// Adaptive draft length for model drafts (DraftLengthParams): the number of drafts per round
// follows the draft's confidence, and the output stays exactly the target's (chi-square against
// enumeration at T > 0, token equality at T = 0).
#include <gtest/gtest.h>

#include "sampling/chi_square.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::FakeLM;
using testing::greedy_reference;
using testing::joint_counts;
using testing::params;

DraftLengthParams adaptive(float verify_cost, float draft_cost) {
  DraftLengthParams p;
  p.adaptive = true;
  p.verify_cost = verify_cost;
  p.draft_cost = draft_cost;
  return p;
}

// Drives a ModelDrafter through the decoder (the decoder owns no drafter of its own here).
struct AdaptiveRun {
  AdaptiveRun(FakeLM& target, FakeLM& draft, const DraftLengthParams& length,
              const SamplingParams& sp, int gamma, uint64_t seed)
      : drafter(draft, length), rng(seed), dec(target, drafter, sp, gamma, rng) {}
  ModelDrafter drafter;
  Rng rng;
  SpeculativeDecoder dec;
};

// The decision must not look at y_i: a variant that draws y_i first and stops on q_i(y_i)
// (so that unlikely draws are withheld) biases the output, and this test fails on it with
// p-values of 0 (checked when written).
TEST(DraftLength, AdaptiveLengthKeepsTheTargetsDistribution) {
  FakeLM target(5, 1, 2.0f);
  FakeLM draft(5, 2, 0.0f, 1 << 20, &target, 1.5f);
  int config = 0;
  // Calibrated (the default), the raw confidence, and a pass-cost line.
  DraftLengthParams raw = adaptive(0.3f, 0.1f), line = adaptive(0.1f, 0.15f);
  raw.calibrate = false;
  line.pass_costs = {1.1f, 1.3f, 2.2f};
  for (const DraftLengthParams& len : {adaptive(0.1f, 0.2f), raw, line}) {
    for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
      const std::vector<int32_t> prompt{config % 5, 3};
      AdaptiveRun r(target, draft, len, sp, 5, 900 + config);
      int64_t drafted = 0, rounds = 0;
      const std::vector<int64_t> counts =
          joint_counts(r.dec, 5, prompt, 3, 40000, [&](const DecodeStats& s) {
            drafted += s.drafted;
            rounds += s.rounds;
          });
      const ChiSquareResult c = chi_square_test(counts, exact_joint(target, sp, prompt, 3));
      EXPECT_EQ(c.impossible, 0);
      EXPECT_GT(c.p_value, 1e-4) << "config " << config << " stat " << c.stat << " dof " << c.dof;
      // Rounds really were cut short: fewer drafts than gamma (or the budget) would give.
      EXPECT_LT(drafted, 3 * rounds) << "config " << config;
      ++config;
    }
  }
}

TEST(DraftLength, AdaptiveGreedyEqualsTargetGreedy) {
  FakeLM target(7, 1, 2.0f);
  target.set_rounding(true);
  FakeLM draft(7, 2, 0.0f, 1 << 20, &target, 1.5f);
  Rng prompts(4);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i <= trial % 3; ++i) {
      prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    }
    const std::vector<int32_t> want = greedy_reference(target, prompt, 24);
    for (int gamma : {1, 3, 8}) {
      AdaptiveRun r(target, draft, adaptive(0.15f, 0.2f), params(0.0f), gamma, 1);
      r.dec.start(prompt, 24);
      r.dec.run();
      ASSERT_EQ(std::vector<int32_t>(r.dec.generated().begin(), r.dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
    }
  }
}

// A confident draft (the target itself) drafts the whole gamma; an unconfident one (flat
// logits) proposes nothing and leaves the round to a plain target step.
TEST(DraftLength, ConfidenceDecidesTheLength) {
  FakeLM target(6, 1, 8.0f);
  FakeLM same(6, 1, 8.0f);
  FakeLM flat(6, 3, 0.01f);
  const std::vector<int32_t> prompt{1, 2};
  {
    AdaptiveRun r(target, same, adaptive(0.05f, 0.05f), params(0.0f), 4, 1);
    r.dec.start(prompt, 16);
    r.dec.run();
    EXPECT_GT(r.dec.stats().drafted, 0);
    EXPECT_EQ(r.dec.stats().accepted, r.dec.stats().drafted);
  }
  {
    AdaptiveRun r(target, flat, adaptive(0.3f, 0.1f), params(0.0f), 4, 1);
    r.dec.start(prompt, 16);
    r.dec.run();
    EXPECT_EQ(r.dec.stats().drafted, 0);
    EXPECT_EQ(r.dec.generated().size(), 16u);
  }
  {
    DraftLengthParams fixed;  // not adaptive: always gamma while the budget allows
    AdaptiveRun r(target, flat, fixed, params(0.0f), 4, 1);
    r.dec.start(prompt, 16);
    r.dec.run();
    EXPECT_GT(r.dec.stats().drafted, 0);
  }
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// The rows' prices are the rises of the pass-cost line's lower convex hull: the measured
// Qwen2.5-Coder 1.5B line (cheap to 5 tokens, a step at 6) prices rows 1-4 alike and rows 5-8
// alike, and a row past the line's end at its last slope.
TEST(DraftLength, VerifyRowsCostTheRiseOfThePassCostHull) {
  DraftLengthParams p;
  p.verify_cost = 0.5f;
  EXPECT_EQ(verify_row_costs(p, 3), (std::vector<double>{0.5, 0.5, 0.5}));  // no line: flat
  p.pass_costs = {1.12f, 1.24f, 1.42f, 1.46f, 2.04f, 2.07f, 2.28f, 2.51f};
  const std::vector<double> rows = verify_row_costs(p, 10);
  ASSERT_EQ(rows.size(), 10u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rows[static_cast<size_t>(i)], 0.46 / 4, 1e-6) << i;
  for (int i = 4; i < 10; ++i) EXPECT_NEAR(rows[static_cast<size_t>(i)], 1.05 / 4, 1e-6) << i;
  // A line that falls (noise) prices no row below 0, and a convex line is its own hull.
  p.pass_costs = {0.9f};
  EXPECT_EQ(verify_row_costs(p, 2), (std::vector<double>{0.0, 0.0}));
  p.pass_costs = {1.1f, 1.3f, 1.6f};
  const std::vector<double> convex = verify_row_costs(p, 4);
  EXPECT_NEAR(convex[0], 0.1, 1e-6);
  EXPECT_NEAR(convex[1], 0.2, 1e-6);
  EXPECT_NEAR(convex[2], 0.3, 1e-6);
  EXPECT_NEAR(convex[3], 0.3, 1e-6);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// llama.cpp's --draft-p-min: a round ends before a draft the draft gives less than p_min, under
// any policy. Exact (decided from q_i before y_i is drawn), and it really cuts rounds.
TEST(DraftPMin, KeepsTheTargetsDistributionAndCutsRounds) {
  FakeLM target(5, 1, 2.0f);
  FakeLM draft(5, 2, 0.0f, 1 << 20, &target, 1.5f);
  int config = 0;
  for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
    DraftLengthParams len;  // fixed: without p_min every round drafts gamma (or the budget)
    len.p_min = 0.5f;
    const std::vector<int32_t> prompt{config, 3};
    AdaptiveRun r(target, draft, len, sp, 4, 700 + config);
    int64_t drafted = 0, rounds = 0, baseline = 0;
    const std::vector<int64_t> counts =
        joint_counts(r.dec, 5, prompt, 3, 40000, [&](const DecodeStats& s) {
          drafted += s.drafted;
          rounds += s.rounds;
          baseline += s.baseline_steps;
        });
    const ChiSquareResult c = chi_square_test(counts, exact_joint(target, sp, prompt, 3));
    EXPECT_EQ(c.impossible, 0);
    EXPECT_GT(c.p_value, 1e-4) << "config " << config << " stat " << c.stat << " dof " << c.dof;
    EXPECT_GT(baseline, 0) << "config " << config;          // rounds whose first draft was unsure
    EXPECT_LT(drafted, 2 * rounds) << "config " << config;  // a 3-token budget allows 2
    ++config;
  }
}

TEST(DraftPMin, GreedyRoundsStopAtTheFirstUnsureDraft) {
  FakeLM target(7, 1, 2.0f);
  target.set_rounding(true);
  FakeLM draft(7, 2, 0.0f, 1 << 20, &target, 1.5f);
  const std::vector<int32_t> prompt{2, 5};
  const std::vector<int32_t> want = greedy_reference(target, prompt, 40);
  int64_t drafted_all = 0;
  for (float p_min : {0.0f, 0.4f, 0.7f, 1.0f}) {
    DraftLengthParams len;
    len.p_min = p_min;
    AdaptiveRun r(target, draft, len, params(0.0f), 4, 1);
    r.dec.start(prompt, 40);
    r.dec.run();
    EXPECT_EQ(std::vector<int32_t>(r.dec.generated().begin(), r.dec.generated().end()), want)
        << "p_min " << p_min;
    const int64_t drafted = r.dec.stats().drafted;
    if (p_min == 0.0f) {
      drafted_all = drafted;
      EXPECT_LE(r.dec.stats().baseline_steps, 1);  // fixed γ 4: only the budget's last token
    } else {
      EXPECT_LT(drafted, drafted_all) << "p_min " << p_min;
    }
    // A greedy draft's confidence is a softmax probability: below 1 for these logits.
    if (p_min == 1.0f) {
      EXPECT_EQ(drafted, 0);
    }
  }
}

// llama.cpp's --draft-min, as the engine sets it: the model drafts at least that many a round
// (DraftLengthParams::min_drafts), and the decoder makes a round with less room a plain step.
TEST(DraftMin, TheModelDraftsAtLeastTheMinimumAndTheDistributionIsKept) {
  FakeLM target(5, 1, 2.0f);
  FakeLM draft(5, 2, 0.0f, 1 << 20, &target, 1.5f);
  int config = 0;
  for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
    const std::vector<int32_t> prompt{config + 1, 2};
    DraftLengthParams len;  // p_min alone would cut rounds to every length up to γ
    len.p_min = 0.4f;
    len.min_drafts = 3;
    AdaptiveRun r(target, draft, len, sp, 5, 300 + config);
    r.dec.set_min_drafts(3);
    int64_t rounds = 0;
    bool short_round = false;
    const std::vector<int64_t> counts =
        joint_counts(r.dec, 5, prompt, 5, 40000, [&](const DecodeStats& s) {
          rounds += s.rounds;
          for (const RoundLog& l : s.log) short_round |= l.gamma > 0 && l.gamma < 3;
        });
    EXPECT_GT(rounds, 0) << "config " << config;
    EXPECT_FALSE(short_round) << "config " << config;
    const ChiSquareResult c = chi_square_test(counts, exact_joint(target, sp, prompt, 5));
    EXPECT_EQ(c.impossible, 0);
    EXPECT_GT(c.p_value, 1e-4) << "config " << config << " stat " << c.stat << " dof " << c.dof;
    ++config;
  }
}

// The decoder drops a short proposal only when its drafts are one-hot (a greedy draft, prompt
// lookup): then the proposal, and whether to drop it, follow from the committed text. Dropping
// short sampled proposals biased this very test's chi-square to p = 1e-26..1e-159 (when
// written): the drafts verified were then draws conditioned on the round's length.
TEST(DraftMin, OnlyOneHotProposalsAreDropped) {
  FakeLM target(5, 1, 2.0f);
  target.set_rounding(true);
  FakeLM draft(5, 2, 0.0f, 1 << 20, &target, 1.5f);
  DraftLengthParams len;  // no min_drafts: p_min leaves rounds of every length
  len.p_min = 0.4f;
  int64_t dropped = 0;
  for (int32_t first = 0; first < 5; ++first) {
    const std::vector<int32_t> prompt{first, 2};
    AdaptiveRun r(target, draft, len, params(0.0f), 5, 1);
    r.dec.set_min_drafts(3);
    r.dec.start(prompt, 24);
    r.dec.run();
    EXPECT_EQ(std::vector<int32_t>(r.dec.generated().begin(), r.dec.generated().end()),
              greedy_reference(target, prompt, 24));
    dropped += r.dec.stats().dropped_rounds;
    for (const RoundLog& l : r.dec.stats().log) EXPECT_FALSE(l.gamma > 0 && l.gamma < 3);
  }
  EXPECT_GT(dropped, 0);

  const std::vector<int32_t> prompt{1, 2};
  AdaptiveRun r(target, draft, len, params(1.0f), 5, 77);
  r.dec.set_min_drafts(3);
  int64_t sampled_dropped = 0;
  bool short_round = false;
  const std::vector<int64_t> counts =
      joint_counts(r.dec, 5, prompt, 5, 40000, [&](const DecodeStats& s) {
        sampled_dropped += s.dropped_rounds;
        for (const RoundLog& l : s.log) short_round |= l.gamma > 0 && l.gamma < 3;
      });
  EXPECT_EQ(sampled_dropped, 0);
  EXPECT_TRUE(short_round);  // verified, not dropped
  const ChiSquareResult c = chi_square_test(counts, exact_joint(target, params(1.0f), prompt, 5));
  EXPECT_EQ(c.impossible, 0);
  EXPECT_GT(c.p_value, 1e-4) << "stat " << c.stat << " dof " << c.dof;
}

// A dropped round leaves the draft's cache at the committed text: the rows it ran for its
// drafts go, so that the next round's catch-up writes at the right positions.
TEST(DraftMin, DiscardedRoundTruncatesTheDraftsCache) {
  FakeLM target(6, 1, 2.0f);
  FakeLM draft(6, 2, 0.0f, 1 << 20, &target, 1.5f);
  ModelDrafter drafter(draft);  // fixed γ
  const std::vector<int32_t> text{1, 2, 3};
  drafter.start(text, 0);
  Rng rng(1);
  std::vector<int32_t> drafts;
  std::vector<Distribution> q;
  ASSERT_EQ(drafter.propose(text, 4, params(0.0f), rng, drafts, q), 4);
  EXPECT_EQ(draft.length(), 3 + 3);  // t[0..3) and y_1..y_3
  drafter.discard_round(text, 3, 4);
  EXPECT_EQ(draft.length(), 3);
  EXPECT_EQ(drafter.committed(), 3);
}

// A γ below the minimum (the budget's end) is a plain step at once: the draft never runs.
TEST(DraftMin, ABudgetBelowTheMinimumDraftsNothing) {
  FakeLM target(6, 1, 2.0f);
  FakeLM draft(6, 2, 0.0f, 1 << 20, &target, 1.5f);
  AdaptiveRun r(target, draft, DraftLengthParams{}, params(0.0f), 4, 1);
  r.dec.set_min_drafts(4);
  r.dec.start(std::vector<int32_t>{1, 2}, 4);  // 4 tokens: γ at most 3
  r.dec.run();
  EXPECT_EQ(r.dec.generated().size(), 4u);
  EXPECT_EQ(r.dec.stats().rounds, 0);
  EXPECT_EQ(r.dec.stats().dropped_rounds, 0);
  EXPECT_EQ(r.dec.stats().baseline_steps, 4);
}

}  // namespace
}  // namespace specdec
