#include "sampling/mirostat.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/vec_ops.h"

namespace specdec {

namespace {

// llama.cpp's m: how many of the most likely tokens estimate the Zipf exponent.
constexpr int kZipfCandidates = 100;

SamplingParams plain_at_temperature(const SamplingParams& params) {
  SamplingParams out;
  out.temperature = params.temperature;
  out.top_k = 0;
  out.top_p = 1.0f;
  out.min_p = 0.0f;
  out.seed = params.seed;
  return out;  // typical, top-n-sigma, XTC and dynamic temperature are off by default
}

// Version 1's k. The Zipf exponent s is fitted, as in llama.cpp, to the log ratios of successive
// probabilities of the most likely tokens: b_i = log(p_i / p_{i+1}) = (l_i - l_{i+1}) / T against
// t_i = log((i + 2) / (i + 1)). Tokens with a -inf logit (masked) are left out: they would make
// the ratio infinite and the fit meaningless.
int32_t zipf_top_k(std::span<const float> logits, float temperature, float mu) {
  const auto n = static_cast<int32_t>(logits.size());
  thread_local std::vector<int32_t> ids;
  ids.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (std::isfinite(logits[static_cast<size_t>(i)])) ids.push_back(i);
  }
  const auto m = std::min<size_t>(kZipfCandidates, ids.size());
  if (m < 2) return 1;
  const auto before = [&logits](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(m), ids.end(), before);
  double sum_tb = 0, sum_tt = 0;
  for (size_t i = 0; i + 1 < m; ++i) {
    const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    const double b = (static_cast<double>(logits[static_cast<size_t>(ids[i])]) -
                      static_cast<double>(logits[static_cast<size_t>(ids[i + 1])])) /
                     static_cast<double>(temperature);
    sum_tb += t * b;
    sum_tt += t * t;
  }
  const double s = sum_tb / sum_tt;
  const double eps = s - 1, log_n = std::log(static_cast<double>(n));
  // eps / (1 - N^-eps) tends to 1 / ln N as s tends to 1 (a Zipf exponent of 1 is common at
  // T = 1); at s = 1 exactly the formula is 0/0, so the limit stands in for it there.
  const double ratio = std::abs(eps) < 1e-9 ? 1 / log_n : eps / -std::expm1(-eps * log_n);
  const double k = std::pow(std::exp2(static_cast<double>(mu)) * ratio, 1 / s);
  // A flat top (s = 0) gives k = 0 or infinity: the top token alone, or every token.
  if (std::isnan(k) || k < 1) return 1;
  if (k >= static_cast<double>(n)) return n;
  return static_cast<int32_t>(k);
}

// Version 2's cut as a min-p: a token survives when p_i >= 2^-mu, i.e. when its weight
// w_i = exp((l_i - max) / T) is at least 2^-mu * sum(w); the largest weight is 1, so that is
// min_p = 2^-mu * sum(w). (At least the most likely token survives: min_p is capped at 1.)
float surprise_cap_as_min_p(std::span<const float> logits, float max_logit, float temperature,
                            float mu) {
  const auto n = static_cast<int64_t>(logits.size());
  thread_local std::vector<double> weights;
  if (weights.size() < logits.size()) weights.resize(logits.size());
  exp_shifted_scaled_f64(logits.data(), n, max_logit, 1.0 / static_cast<double>(temperature),
                         weights.data());
  double mass = 0;
  for (int64_t i = 0; i < n; ++i) mass += weights[static_cast<size_t>(i)];
  const double min_p = std::exp2(-static_cast<double>(mu)) * mass;
  // min_p 0 would mean "off", which keeps every token with weight > 0: the same set.
  return static_cast<float>(std::clamp(min_p, 0.0, 1.0));
}

}  // namespace

float mirostat_mu_of(const SamplingParams& params) {
  return std::isnan(params.mirostat_mu) ? 2.0f * params.mirostat_tau : params.mirostat_mu;
}

SamplingParams mirostat_filters(std::span<const float> logits, const SamplingParams& params) {
  SamplingParams out = plain_at_temperature(params);
  if (logits.empty()) return out;
  const float max_logit = max_f32(logits.data(), static_cast<int64_t>(logits.size()));
  if (!std::isfinite(max_logit)) return out;  // NaN included
  const float mu = mirostat_mu_of(params);
  if (params.mirostat == 1) {
    out.top_k = zipf_top_k(logits, params.temperature, mu);
  } else {
    out.min_p = surprise_cap_as_min_p(logits, max_logit, params.temperature, mu);
  }
  return out;
}

float mirostat_next_mu(const SamplingParams& params, float token_prob) {
  const float surprise = -std::log2(token_prob);
  return mirostat_mu_of(params) - params.mirostat_eta * (surprise - params.mirostat_tau);
}

}  // namespace specdec
