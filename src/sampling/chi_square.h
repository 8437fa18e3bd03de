// Goodness-of-fit helpers used by the statistical tests of sampling and speculative decoding.
// They live in the library (not a test folder) so every module's tests share one implementation.
#pragma once

#include <cstdint>
#include <span>

namespace specdec {

// Regularized upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a), for a > 0, x >= 0.
double regularized_gamma_q(double a, double x);

// P(X >= stat) for X ~ chi-square with dof degrees of freedom.
double chi_square_sf(double stat, double dof);

struct ChiSquareResult {
  double stat = 0;
  int dof = 0;
  double p_value = 1;
  // Observations in a bin whose expected probability is exactly 0: any such count is an
  // impossible event under the null, so tests should require it to be 0 on its own.
  int64_t impossible = 0;
};

// Pearson's test of observed counts against expected probabilities (same length, probs summing
// to ~1). Bins whose expected count is below min_expected are pooled into one bin (the usual
// validity condition of the chi-square approximation); zero-probability bins are reported in
// `impossible` instead of being pooled.
ChiSquareResult chi_square_test(std::span<const int64_t> observed, std::span<const double> probs,
                                double min_expected = 5.0);

}  // namespace specdec

namespace specdec {

// Pearson's chi-square test of homogeneity for two samples over the same bins: do a and b come
// from one distribution? Bins whose expected count (under the pooled distribution) is below
// min_expected in either sample are pooled into one bin. dof = bins used - 1.
ChiSquareResult chi_square_two_sample(std::span<const int64_t> a, std::span<const int64_t> b,
                                      double min_expected = 5.0);

}  // namespace specdec
