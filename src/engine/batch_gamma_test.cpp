#include "engine/batch_gamma.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

TEST(BatchGammaCap, SharesTheVerifyRowsBetweenTheActiveSlots) {
  EXPECT_EQ(batch_gamma_cap(7, 2), 2);  // 2 x 3 rows
  EXPECT_EQ(batch_gamma_cap(7, 3), 1);
  EXPECT_EQ(batch_gamma_cap(7, 4), 0);  // plain batched steps
  EXPECT_EQ(batch_gamma_cap(7, 8), 0);
  EXPECT_EQ(batch_gamma_cap(9, 2), 3);
  EXPECT_EQ(batch_gamma_cap(9, 4), 1);
}

TEST(BatchGammaCap, ASlotAloneIsNotCapped) {
  EXPECT_EQ(batch_gamma_cap(7, 1), kNoGammaCap);
  EXPECT_EQ(batch_gamma_cap(7, 0), kNoGammaCap);  // nobody counted yet: this request alone
  EXPECT_EQ(batch_gamma_cap(2, 1), kNoGammaCap);
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
