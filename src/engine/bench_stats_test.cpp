#include "engine/bench_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specdec {
namespace {

TEST(BenchStats, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3.0}), 3.0);
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({7.0, 7.0, 1.0, 9.0, 9.0, 9.0}), 8.0);
}

TEST(BenchStats, SpreadIsMeanMinMax) {
  const Spread s = spread({0.2, 0.6, 0.4});
  EXPECT_NEAR(s.mean, 0.4, 1e-12);
  EXPECT_EQ(s.min, 0.2);
  EXPECT_EQ(s.max, 0.6);
  const Spread none = spread({});
  EXPECT_EQ(none.mean, 0.0);
  EXPECT_EQ(none.max, 0.0);
}

TEST(BenchStats, ExpectedTokensMatchesClosedForm) {
  EXPECT_EQ(expected_tokens_per_round(0.0, 5), 1.0);  // the correction token only
  EXPECT_EQ(expected_tokens_per_round(1.0, 5), 6.0);  // every draft plus the bonus token
  EXPECT_NEAR(expected_tokens_per_round(0.5, 1), 1.5, 1e-12);
  for (double a : {0.1, 0.5, 0.8, 0.99}) {
    for (int g : {1, 2, 4, 8}) {
      EXPECT_NEAR(expected_tokens_per_round(a, g), (1 - std::pow(a, g + 1)) / (1 - a), 1e-12);
    }
  }
}

TEST(BenchStats, TheoreticalSpeedup) {
  // Free drafts: the speedup is the tokens per round.
  EXPECT_NEAR(theoretical_speedup(0.8, 4, 0.0), expected_tokens_per_round(0.8, 4), 1e-12);
  // Leviathan et al.'s example shape: alpha 0.8, gamma 4, c 0.05 -> 3.36 / 1.2.
  EXPECT_NEAR(theoretical_speedup(0.8, 4, 0.05), 3.3616 / 1.2, 1e-9);
  // Nothing accepted and costly drafts: slower than the target alone.
  EXPECT_NEAR(theoretical_speedup(0.0, 3, 0.5), 1.0 / 2.5, 1e-12);
  // A verify pass that costs 1.5 decode steps.
  EXPECT_NEAR(theoretical_speedup(0.5, 1, 0.0, 1.5), 1.0, 1e-12);
  EXPECT_EQ(theoretical_speedup(0.5, 0, 0.0, 0.0), 0.0);
}

}  // namespace
}  // namespace specdec
