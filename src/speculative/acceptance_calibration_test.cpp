#include "speculative/acceptance_calibration.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

TEST(AcceptanceCalibration, StartsFromTheConfidenceItself) {
  const AcceptanceCalibration cal;
  for (double c : {0.0, 0.3, 0.75, 0.99, 1.0}) EXPECT_DOUBLE_EQ(cal.estimate(c), c);
  EXPECT_DOUBLE_EQ(cal.estimate(1.5), 1.0);  // out-of-range confidences are clamped
  EXPECT_DOUBLE_EQ(cal.estimate(-1.0), 0.0);
}

TEST(AcceptanceCalibration, BinsAreFinerTowardsOne) {
  EXPECT_EQ(AcceptanceCalibration::bin(0.1), 0);
  EXPECT_EQ(AcceptanceCalibration::bin(0.5), 0);
  EXPECT_EQ(AcceptanceCalibration::bin(0.51), 1);
  EXPECT_EQ(AcceptanceCalibration::bin(0.96), 5);
  EXPECT_EQ(AcceptanceCalibration::bin(0.99), 6);
  EXPECT_EQ(AcceptanceCalibration::bin(0.999), AcceptanceCalibration::kBins - 1);
  EXPECT_EQ(AcceptanceCalibration::bin(1.0), AcceptanceCalibration::kBins - 1);
}

// An over-confident draft: 99.9 % sure, accepted 40 % of the time. The estimate for that bin
// moves to about 0.4, and other bins keep their prior.
TEST(AcceptanceCalibration, LearnsAnOverconfidentBinAndLeavesTheOthers) {
  AcceptanceCalibration cal;
  for (int i = 0; i < 500; ++i) cal.observe(0.999, i % 5 < 2);
  EXPECT_NEAR(cal.estimate(0.999), 0.4, 0.05);
  EXPECT_NEAR(cal.estimate(0.9999), 0.4, 0.05);
  EXPECT_DOUBLE_EQ(cal.estimate(0.6), 0.6);
}

// Decayed counts: after a change of regime the estimate follows the recent drafts.
TEST(AcceptanceCalibration, FollowsARunWhoseAcceptanceChanges) {
  AcceptanceCalibration cal;
  for (int i = 0; i < 300; ++i) cal.observe(0.85, false);
  EXPECT_LT(cal.estimate(0.85), 0.1);
  for (int i = 0; i < 300; ++i) cal.observe(0.85, true);
  EXPECT_GT(cal.estimate(0.85), 0.9);
}

}  // namespace
}  // namespace specdec
