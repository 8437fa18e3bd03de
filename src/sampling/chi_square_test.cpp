#include "sampling/chi_square.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/rng.h"

namespace specdec {
namespace {

std::vector<int64_t> draw(const std::vector<double>& probs, int n, Rng& rng) {
  std::vector<int64_t> counts(probs.size(), 0);
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform(), acc = 0;
    size_t k = 0;
    for (; k + 1 < probs.size(); ++k) {
      acc += probs[k];
      if (u < acc) break;
    }
    ++counts[k];
  }
  return counts;
}

TEST(ChiSquareTwoSample, SameDistributionPassesDifferentOneFails) {
  Rng rng(5);
  const std::vector<double> p = {0.4, 0.3, 0.2, 0.05, 0.03, 0.02};
  const std::vector<double> q = {0.35, 0.35, 0.2, 0.05, 0.03, 0.02};
  auto a = draw(p, 20000, rng), b = draw(p, 20000, rng), c = draw(q, 20000, rng);
  ChiSquareResult same = chi_square_two_sample(a, b);
  EXPECT_EQ(same.dof, 5);
  EXPECT_GT(same.p_value, 1e-3);
  ChiSquareResult diff = chi_square_two_sample(a, c);
  EXPECT_LT(diff.p_value, 1e-9);
}

TEST(ChiSquareTwoSample, PoolsRareBinsAndHandlesUnequalSizes) {
  // Hand-computed: bins {10,30} and {20,40}; the rare bins {1,0},{0,1} pool into {1,1}.
  std::vector<int64_t> a = {10, 20, 1, 0}, b = {30, 40, 0, 1};
  ChiSquareResult r = chi_square_two_sample(a, b, 5.0);
  // Bins used: {10,30}, {20,40} and the pooled {1,1}; expected counts split 31:71.
  EXPECT_EQ(r.dof, 2);
  EXPECT_NEAR(r.stat, 1.1585642889595638, 1e-9);
  EXPECT_NEAR(r.p_value, std::exp(-r.stat / 2), 1e-9);  // chi-square with 2 dof
}

}  // namespace
}  // namespace specdec
