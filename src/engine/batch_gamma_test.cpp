#include "engine/batch_gamma.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

// The straight line alone: every row past the first at `row` (BatchCost::flat_rows 1).
BatchCost linear_cost(double row, double draft, double read = 0.07) {
  BatchCost c{row, draft, read};
  c.flat_rows = 1;
  return c;
}

TEST(BatchGammaGain, TheDefaultLineIsFlatForFiveRowsThenSteep) {
  // Two slots at acceptance 0.7, γ 1: a pass of 4 rows at 1 + 3 x 0.04 = 1.12 steps against plain
  // steps of 2 rows at 1.04, plus one batched draft step (0.26 x 1.04).
  const BatchCost cost{0.15, 0.26};
  EXPECT_NEAR(batch_gamma_gain(cost, 2, 0.7, 1), 1.7 * 1.04 / (1.12 + 0.26 * 1.04), 1e-12);
  // 8 rows (4 slots, γ 1): 1.16 for the first five, 0.15 each for the other three.
  EXPECT_NEAR(batch_gamma_gain(cost, 4, 0.7, 1), 1.7 * 1.12 / (1.61 + 0.26 * 1.12), 1e-12);
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.7), 1);
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.5), 1);  // the straight line: 0
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.9), 2);  // the straight line: 3
  EXPECT_EQ(batch_gamma_cap(cost, 4, 0.9), 1);
  EXPECT_EQ(batch_gamma_cap(cost, 8, 0.9), 0);
  // At 4 slots and 0.7 the drafts gain 0.1 %: too little to pay for reading any prompt.
  const double gain = batch_gamma_gain(cost, 4, 0.7, 1);
  EXPECT_FALSE(catch_up_pays(cost, 10, 96, 4, gain));
  // At 2 slots they pay for reading a 150-token prompt before a 96-token answer, which the
  // straight line's gain (1.12) did not.
  EXPECT_TRUE(catch_up_pays(cost, 150, 96, 2, batch_gamma_gain(cost, 2, 0.7, 1)));
  EXPECT_FALSE(
      catch_up_pays(cost, 150, 96, 2, batch_gamma_gain(linear_cost(0.15, 0.26), 2, 0.7, 1)));
}

TEST(BatchGammaGain, IsOneWithoutDraftsAndTheModelsRatioOtherwise) {
  const BatchCost cost = linear_cost(0.15, 0.26);
  EXPECT_DOUBLE_EQ(batch_gamma_gain(cost, 4, 0.7, 0), 1.0);
  // 2 slots, γ 1, acceptance 0.7: 1.7 tokens against plain steps of 2 rows (1.15) over a pass of
  // 4 rows (1.45) plus one batched draft step (0.26 x 1.15).
  EXPECT_NEAR(batch_gamma_gain(cost, 2, 0.7, 1), 1.7 * 1.15 / (1.45 + 0.26 * 1.15), 1e-12);
}

TEST(BatchGammaCap, FollowsTheBatchAndTheAcceptance) {
  const BatchCost cost = linear_cost(0.15, 0.26);
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.7), 1);
  EXPECT_EQ(batch_gamma_cap(cost, 4, 0.7), 1);
  EXPECT_EQ(batch_gamma_cap(cost, 8, 0.7), 0);
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.5), 0);
  EXPECT_EQ(batch_gamma_cap(cost, 2, 0.9), 3);
  EXPECT_EQ(batch_gamma_cap(cost, 4, 0.9), 2);
  EXPECT_EQ(batch_gamma_cap(cost, 8, 0.9), 1);
  // Never more drafts for more slots or for a lower acceptance.
  for (double a : {0.3, 0.6, 0.8, 0.95}) {
    for (int32_t n = 2; n < 16; ++n) {
      EXPECT_LE(batch_gamma_cap(cost, n + 1, a), batch_gamma_cap(cost, n, a)) << a << " " << n;
      EXPECT_LE(batch_gamma_cap(cost, n, a - 0.05), batch_gamma_cap(cost, n, a)) << a << " " << n;
    }
  }
  // Rows dearer than what a draft can save: none at all.
  EXPECT_EQ(batch_gamma_cap(linear_cost(10.0, 0.26), 2, 0.99), 0);
}

TEST(BatchGammaCap, ASlotAloneIsNotCapped) {
  EXPECT_EQ(batch_gamma_cap(BatchCost{}, 1, 0.7), kNoGammaCap);
  EXPECT_EQ(batch_gamma_cap(BatchCost{}, 0, 0.7), kNoGammaCap);  // nobody counted yet
  EXPECT_EQ(batch_gamma_cap(linear_cost(10.0, 0.26), 1, 0.1), kNoGammaCap);
}

TEST(CatchUpPays, ADraftWithNothingToReadAlwaysDrafts) {
  const BatchCost cost = linear_cost(0.15, 0.26);
  EXPECT_TRUE(catch_up_pays(cost, 0, 0, 8, 1.0));
  EXPECT_TRUE(catch_up_pays(cost, 0, 5, 1, 0.0));
}

TEST(CatchUpPays, AloneTheBacklogMayBeFourTimesWhatIsLeft) {
  const BatchCost cost = linear_cost(0.15, 0.26);
  EXPECT_TRUE(catch_up_pays(cost, 800, 200, 1, 0.0));
  EXPECT_FALSE(catch_up_pays(cost, 801, 200, 1, 0.0));
  // Nothing left to generate: never.
  EXPECT_FALSE(catch_up_pays(cost, 1, 0, 1, 0.0));
  EXPECT_FALSE(catch_up_pays(cost, 1, -3, 1, 0.0));
}

TEST(CatchUpPays, InABatchTheReadMustCostLessThanTheDraftsSave) {
  const BatchCost cost = linear_cost(0.15, 0.26, 0.07);
  // 2 slots, drafts gaining 1.12 (acceptance 0.7, γ 1): 96 tokens of plain steps of 1.15 save
  // 96 x 1.15 x (1 - 1 / 1.12) = 11.8 steps; reading costs 2 x 0.07 = 0.14 per token, so up to
  // 84 tokens pay and a 190-token prompt does not.
  EXPECT_TRUE(catch_up_pays(cost, 84, 96, 2, 1.12));
  EXPECT_FALSE(catch_up_pays(cost, 85, 96, 2, 1.12));
  EXPECT_FALSE(catch_up_pays(cost, 190, 96, 2, 1.12));
  // The same prompt with a longer answer, or drafts that gain more, pays.
  EXPECT_TRUE(catch_up_pays(cost, 190, 400, 2, 1.12));
  EXPECT_TRUE(catch_up_pays(cost, 190, 96, 2, 1.5));
  // More slots wait for the read: at 4 slots and gain 1.08 a short prompt (30 tokens against
  // 96 x 1.45 x 0.074 / 0.28 = 36.9) pays, a longer one (40) does not.
  EXPECT_TRUE(catch_up_pays(cost, 30, 96, 4, 1.08));
  EXPECT_FALSE(catch_up_pays(cost, 40, 96, 4, 1.08));
  // Drafts that gain nothing never pay for a read.
  EXPECT_FALSE(catch_up_pays(cost, 1, 1000, 2, 1.0));
  EXPECT_FALSE(catch_up_pays(cost, 1, 1000, 2, 0.9));
  // Never more reading for more slots.
  for (int32_t lag : {10, 50, 200}) {
    for (int32_t n = 2; n < 16; ++n) {
      EXPECT_LE(catch_up_pays(cost, lag, 96, n + 1, 1.1), catch_up_pays(cost, lag, 96, n, 1.1))
          << lag << " " << n;
    }
  }
}

}  // namespace
}  // namespace specdec
