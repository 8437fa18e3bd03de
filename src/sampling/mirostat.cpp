#include "sampling/mirostat.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "sampling/rank_order.h"
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
  select_top_k(logits, std::min(kZipfCandidates, n), ids);
  std::sort(ids.begin(), ids.end(), RanksBefore{logits.data()});
  while (!ids.empty() && !std::isfinite(logits[static_cast<size_t>(ids.back())])) ids.pop_back();
  const size_t m = ids.size();
  if (m < 2) return 1;
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

}  // namespace

float mirostat_mu_of(const SamplingParams& params) {
  return std::isnan(params.mirostat_mu) ? 2.0f * params.mirostat_tau : params.mirostat_mu;
}

MirostatCut mirostat_cut(std::span<const float> logits, const SamplingParams& params) {
  MirostatCut cut{plain_at_temperature(params)};
  if (logits.empty()) return cut;
  const float mu = mirostat_mu_of(params);
  if (params.mirostat == 1) {
    // The fit sorts by logit, which a NaN would break; make_distribution refuses such a row (and
    // one without a finite maximum) with its own message, so it is left to it. Version 2 reads no
    // logit here and leaves that check to make_distribution's own pass.
    const float max_logit = max_f32(logits.data(), static_cast<int64_t>(logits.size()));
    if (!std::isfinite(max_logit)) return cut;  // NaN included
    cut.filters.top_k = zipf_top_k(logits, params.temperature, mu);
  } else {
    // Version 2 keeps the tokens of surprise -log2 p <= mu, i.e. p >= 2^-mu.
    cut.prob_floor = std::exp2(-static_cast<double>(mu));
  }
  return cut;
}

float mirostat_next_mu(const SamplingParams& params, float token_prob) {
  const float surprise = -std::log2(token_prob);
  return mirostat_mu_of(params) - params.mirostat_eta * (surprise - params.mirostat_tau);
}

}  // namespace specdec
