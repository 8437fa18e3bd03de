#include "sampling/chi_square.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"

namespace specdec {

namespace {

// Series P(a, x) = x^a e^-x / Γ(a+1) * Σ_n x^n / ((a+1)...(a+n)); converges fast for x < a + 1.
double gamma_p_series(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 10000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
  }
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Continued fraction for Q(a, x) (modified Lentz); converges fast for x >= a + 1.
double gamma_q_fraction(double a, double x) {
  constexpr double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

}  // namespace

double regularized_gamma_q(double a, double x) {
  if (!(a > 0) || x < 0) fail("regularized_gamma_q: need a > 0 and x >= 0, got a=", a, " x=", x);
  if (x == 0) return 1.0;
  if (x < a + 1.0) return 1.0 - gamma_p_series(a, x);
  return gamma_q_fraction(a, x);
}

double chi_square_sf(double stat, double dof) {
  if (dof <= 0) return 1.0;
  return regularized_gamma_q(dof / 2.0, std::max(stat, 0.0) / 2.0);
}

ChiSquareResult chi_square_test(std::span<const int64_t> observed, std::span<const double> probs,
                                double min_expected) {
  if (observed.size() != probs.size()) fail("chi_square_test: size mismatch");
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  ChiSquareResult r;
  if (n == 0) return r;
  double pooled_obs = 0, pooled_exp = 0;
  int bins = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = probs[i] * static_cast<double>(n);
    if (probs[i] <= 0) {
      r.impossible += observed[i];
    } else if (e < min_expected) {
      pooled_obs += static_cast<double>(observed[i]);
      pooled_exp += e;
    } else {
      const double d = static_cast<double>(observed[i]) - e;
      r.stat += d * d / e;
      ++bins;
    }
  }
  if (pooled_exp > 0) {
    const double d = pooled_obs - pooled_exp;
    r.stat += d * d / pooled_exp;
    ++bins;
  }
  r.dof = bins - 1;
  r.p_value = r.dof > 0 ? chi_square_sf(r.stat, r.dof) : 1.0;
  return r;
}

}  // namespace specdec

namespace specdec {

ChiSquareResult chi_square_two_sample(std::span<const int64_t> a, std::span<const int64_t> b,
                                      double min_expected) {
  if (a.size() != b.size()) fail("chi_square_two_sample: bin counts differ");
  double na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    na += static_cast<double>(a[i]);
    nb += static_cast<double>(b[i]);
  }
  ChiSquareResult r;
  if (na <= 0 || nb <= 0) return r;
  const double n = na + nb;
  // Bins in the test: each kept bin, plus one pooled bin of every small one.
  std::vector<std::pair<double, double>> bins;
  double pool_a = 0, pool_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double total = static_cast<double>(a[i] + b[i]);
    if (total == 0) continue;
    const double smaller_expected = total * std::min(na, nb) / n;
    if (smaller_expected < min_expected) {
      pool_a += static_cast<double>(a[i]);
      pool_b += static_cast<double>(b[i]);
    } else {
      bins.emplace_back(static_cast<double>(a[i]), static_cast<double>(b[i]));
    }
  }
  if (pool_a + pool_b > 0) bins.emplace_back(pool_a, pool_b);
  if (bins.size() < 2) return r;
  for (const auto& [oa, ob] : bins) {
    const double total = oa + ob;
    const double ea = total * na / n, eb = total * nb / n;
    r.stat += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
  }
  r.dof = static_cast<int>(bins.size()) - 1;
  r.p_value = chi_square_sf(r.stat, r.dof);
  return r;
}

}  // namespace specdec
