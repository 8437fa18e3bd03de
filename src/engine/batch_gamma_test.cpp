#include "engine/batch_gamma.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

TEST(BatchGammaGain, IsOneWithoutDraftsAndTheModelsRatioOtherwise) {
  const BatchCost cost{0.15, 0.26};
  EXPECT_DOUBLE_EQ(batch_gamma_gain(cost, 4, 0.7, 0), 1.0);
  // 2 slots, γ 1, acceptance 0.7: 1.7 tokens against plain steps of 2 rows (1.15) over a pass of
  // 4 rows (1.45) plus one batched draft step (0.26 x 1.15).
  EXPECT_NEAR(batch_gamma_gain(cost, 2, 0.7, 1), 1.7 * 1.15 / (1.45 + 0.26 * 1.15), 1e-12);
}

TEST(BatchGammaCap, FollowsTheBatchAndTheAcceptance) {
  const BatchCost cost{0.15, 0.26};
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
  EXPECT_EQ(batch_gamma_cap(BatchCost{10.0, 0.26}, 2, 0.99), 0);
}

TEST(BatchGammaCap, ASlotAloneIsNotCapped) {
  EXPECT_EQ(batch_gamma_cap(BatchCost{}, 1, 0.7), kNoGammaCap);
  EXPECT_EQ(batch_gamma_cap(BatchCost{}, 0, 0.7), kNoGammaCap);  // nobody counted yet
  EXPECT_EQ(batch_gamma_cap(BatchCost{10.0, 0.26}, 1, 0.1), kNoGammaCap);
}

TEST(CatchUpPays, ADraftWithNothingToReadAlwaysDrafts) {
  EXPECT_TRUE(catch_up_pays(0, 0, 8));
  EXPECT_TRUE(catch_up_pays(0, 5, 1));
}

TEST(CatchUpPays, TheBacklogMustBeSmallAgainstWhatIsLeftAndShrinksWithTheBatch) {
  // Alone: reading up to four times what is left to generate pays.
  EXPECT_TRUE(catch_up_pays(800, 200, 1));
  EXPECT_FALSE(catch_up_pays(801, 200, 1));
  // Four slots: a quarter of that.
  EXPECT_TRUE(catch_up_pays(200, 200, 4));
  EXPECT_FALSE(catch_up_pays(201, 200, 4));
  // Nothing left to generate: never.
  EXPECT_FALSE(catch_up_pays(1, 0, 1));
  EXPECT_FALSE(catch_up_pays(1, -3, 1));
}

}  // namespace
}  // namespace specdec
