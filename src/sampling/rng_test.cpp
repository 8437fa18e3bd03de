#include "sampling/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/chi_square.h"

namespace specdec {
namespace {

TEST(Rng, SameSeedSameStream) {
  Rng a(42), b(42);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.next_u64(), b.next_u64());
  a.reseed(7);
  b.reseed(7);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.uniform(), b.uniform());
}

TEST(Rng, DifferentSeedsDiffer) {
  Rng a(0), b(1);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += a.next_u64() == b.next_u64();
  EXPECT_EQ(same, 0);
}

TEST(Rng, UniformRangeAndMoments) {
  Rng rng(123);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += u * u;
  }
  // Mean 1/2 (sd of the mean = sqrt(1/12/n) ~ 6.5e-4), E[u^2] = 1/3.
  EXPECT_NEAR(sum / n, 0.5, 4 * 6.5e-4);
  EXPECT_NEAR(sum2 / n, 1.0 / 3.0, 4e-3);
}

TEST(Rng, UniformBucketsChiSquare) {
  Rng rng(99);
  const int buckets = 64, n = 640000;
  std::vector<int64_t> counts(buckets, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(rng.uniform() * buckets)];
  const std::vector<double> probs(buckets, 1.0 / buckets);
  const ChiSquareResult r = chi_square_test(counts, probs);
  EXPECT_GT(r.p_value, 1e-3) << "stat " << r.stat;
}

TEST(ChiSquare, KnownQuantiles) {
  // Reference values of the chi-square survival function.
  EXPECT_NEAR(chi_square_sf(3.841458820694124, 1), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_sf(18.307038053275146, 10), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_sf(10, 10), 0.44049328506521257, 1e-6);
  EXPECT_NEAR(chi_square_sf(124.34211340400407, 100), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_sf(2, 2), std::exp(-1.0), 1e-12);
  EXPECT_LT(chi_square_sf(200, 10), 1e-30);
  EXPECT_NEAR(regularized_gamma_q(1.0, 0.5), std::exp(-0.5), 1e-12);
}

}  // namespace
}  // namespace specdec
