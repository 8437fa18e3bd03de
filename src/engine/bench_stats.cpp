#include "engine/bench_stats.h"

#include <algorithm>
#include <numeric>

namespace specdec {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  // The lower middle is the largest element of the first half after nth_element.
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

Spread spread(const std::vector<double>& v) {
  if (v.empty()) return {};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()), *lo, *hi};
}

double expected_tokens_per_round(double alpha, int32_t gamma) {
  double sum = 0, term = 1;
  for (int32_t i = 0; i <= gamma; ++i, term *= alpha) sum += term;
  return sum;
}

double theoretical_speedup(double alpha, int32_t gamma, double c, double verify_cost) {
  const double cost = static_cast<double>(gamma) * c + verify_cost;
  return cost > 0 ? expected_tokens_per_round(alpha, gamma) / cost : 0.0;
}

}  // namespace specdec
