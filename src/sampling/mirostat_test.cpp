#include "sampling/mirostat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "sampling/distribution.h"

namespace specdec {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams mirostat(int version, float temperature, float mu, float tau = 5.0f,
                        float eta = 0.1f) {
  SamplingParams p;  // the default filters (top-k 40, top-p 0.95, min-p 0.05) stay on: ignored
  p.temperature = temperature;
  p.mirostat = version;
  p.mirostat_tau = tau;
  p.mirostat_eta = eta;
  p.mirostat_mu = mu;
  return p;
}

std::vector<float> log_of(std::vector<double> w) {
  std::vector<float> l;
  for (double x : w) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

// The ids in descending logit order (ties: ascending id), and softmax(logits / T) over them.
struct Sorted {
  std::vector<int32_t> ids;
  std::vector<double> probs;
};

Sorted softmax_sorted(const std::vector<float>& logits, float temperature) {
  Sorted s;
  s.ids.resize(logits.size());
  std::iota(s.ids.begin(), s.ids.end(), 0);
  std::stable_sort(s.ids.begin(), s.ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const double max = logits[static_cast<size_t>(s.ids[0])];
  double sum = 0;
  for (int32_t id : s.ids) {
    const double w = std::exp((logits[static_cast<size_t>(id)] - max) / temperature);
    s.probs.push_back(w);
    sum += w;
  }
  for (double& p : s.probs) p /= sum;
  return s;
}

// Keeps the first `keep` entries of s, renormalized.
Sorted head(Sorted s, size_t keep) {
  s.ids.resize(keep);
  s.probs.resize(keep);
  const double sum = std::accumulate(s.probs.begin(), s.probs.end(), 0.0);
  for (double& p : s.probs) p /= sum;
  return s;
}

// Mirostat 2 written out as llama.cpp states it: sort, cut at the first token whose surprise
// exceeds mu (keeping one), renormalize.
Sorted reference_v2(const std::vector<float>& logits, float temperature, float mu) {
  const Sorted s = softmax_sorted(logits, temperature);
  size_t keep = 0;
  while (keep < s.ids.size() && -std::log2(s.probs[keep]) <= mu) ++keep;
  return head(s, std::max<size_t>(keep, 1));
}

// Mirostat 1 written out: the Zipf fit over the 100 most likely (finite) tokens, then top-k.
Sorted reference_v1(const std::vector<float>& logits, float temperature, float mu) {
  const Sorted s = softmax_sorted(logits, temperature);
  size_t finite = 0;
  while (finite < s.ids.size() && s.probs[finite] > 0) ++finite;
  const size_t m = std::min<size_t>(100, finite);
  double tb = 0, tt = 0;
  for (size_t i = 0; i + 1 < m; ++i) {
    const double t = std::log((i + 2.0) / (i + 1.0));
    tb += t * std::log(s.probs[i] / s.probs[i + 1]);
    tt += t * t;
  }
  const double sh = tb / tt, eps = sh - 1;
  const double n = static_cast<double>(logits.size());
  const double ratio = std::abs(eps) < 1e-9 ? 1 / std::log(n) : eps / (1 - std::pow(n, -eps));
  const double k = std::pow(std::pow(2.0, mu) * ratio, 1 / sh);
  const size_t keep = std::isnan(k) || k < 1 ? 1 : k >= n ? logits.size() : static_cast<size_t>(k);
  return head(s, std::min(keep, finite));
}

void expect_matches(const Distribution& d, const Sorted& want, const char* what) {
  ASSERT_EQ(d.ids, want.ids) << what;
  for (size_t i = 0; i < want.probs.size(); ++i) {
    EXPECT_NEAR(d.probs[i], want.probs[i], 2e-6) << what << " entry " << i;
  }
}

TEST(Mirostat, Version2KeepsTheTokensWhoseSurpriseIsAtMostMu) {
  // p = 1/2, 1/4, 1/8, 1/8: surprises 1, 2, 3, 3 bits.
  const std::vector<float> l = log_of({4, 2, 1, 1});
  Distribution d;
  make_distribution(l, mirostat(2, 1.0f, 2.5f), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(d.probs[0], 2 / 3.0, 1e-6);
  make_distribution(l, mirostat(2, 1.0f, 3.5f), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  // No token within the cap: the most likely one alone.
  make_distribution(l, mirostat(2, 1.0f, 0.5f), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0}));
  make_distribution(l, mirostat(2, 1.0f, -kInf), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0}));
  make_distribution(l, mirostat(2, 1.0f, kInf), d);
  EXPECT_EQ(d.size(), 4u);
}

TEST(Mirostat, Version1KeepsTheTopKOfTheZipfFit) {
  // p_i proportional to i^-2 over N = 1000 tokens: the fit finds s = 2 exactly, so with mu = 5
  // k = (1 * 2^5 / (1 - 1000^-1))^(1/2) = 5.66: the 5 most likely tokens.
  std::vector<double> w;
  for (int i = 1; i <= 1000; ++i) w.push_back(1.0 / (static_cast<double>(i) * i));
  const std::vector<float> l = log_of(w);
  Distribution d;
  make_distribution(l, mirostat(1, 1.0f, 5.0f), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // mu = 9: k = sqrt(512.5) = 22.6.
  make_distribution(l, mirostat(1, 1.0f, 9.0f), d);
  EXPECT_EQ(d.size(), 22u);
  // At T = 2 the same logits are Zipf with s = 1, where the formula is 0/0: its limit is
  // k = 2^mu / ln N = 512 / 6.91 = 74.1.
  make_distribution(l, mirostat(1, 2.0f, 9.0f), d);
  EXPECT_EQ(d.size(), 74u);
}

TEST(Mirostat, ReplacesTheOtherFiltersAndGreedyIgnoresIt) {
  const std::vector<float> l = log_of({4, 3, 2, 1});
  SamplingParams p = mirostat(2, 1.0f, 100.0f);
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  p.typical_p = 0.1f;
  p.xtc_probability = 1.0f;
  Distribution d;
  make_distribution(l, p, d);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_NEAR(d.probs[3], 0.1, 1e-6);
  p.temperature = 0.0f;
  p.mirostat_mu = -100.0f;
  make_distribution(log_of({1, 3, 2, 3}), p, d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{1}));
}

TEST(Mirostat, MatchesTheWrittenOutRulesOnRandomRows) {
  std::mt19937 gen(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  int cut_v1 = 0, cut_v2 = 0;  // rows where the truncation kept more than one token, not all
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = trial % 3 == 0 ? 5000 : 2 + trial % 300;
    std::vector<float> l(n);
    for (float& x : l) x = logit(gen);
    if (trial % 4 == 1) {
      for (size_t i = 0; i < n; i += 3) l[i] = -kInf;  // masked tokens
      l[1] = 2.0f;
    }
    const float t = 0.3f + 1.5f * unit(gen), mu = 12.0f * unit(gen);
    Distribution d;
    make_distribution(l, mirostat(2, t, mu), d);
    expect_matches(d, reference_v2(l, t, mu), "v2");
    cut_v2 += d.size() > 1 && d.size() < n / 2;
    make_distribution(l, mirostat(1, t, mu), d);
    expect_matches(d, reference_v1(l, t, mu), "v1");
    cut_v1 += d.size() > 1 && d.size() < n / 2;
  }
  EXPECT_GT(cut_v1, 100);
  EXPECT_GT(cut_v2, 100);
}

TEST(Mirostat, MuFollowsTheObservedSurprise) {
  SamplingParams p = mirostat(2, 1.0f, 10.0f, 5.0f, 0.1f);
  // Surprise 2 bits, 3 under the target 5: mu rises by 0.1 * 3.
  EXPECT_FLOAT_EQ(mirostat_next_mu(p, 0.25f), 10.3f);
  EXPECT_FLOAT_EQ(mirostat_next_mu(p, 1.0f / 128), 9.8f);
  // A sequence starts at 2 tau.
  p.mirostat_mu = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FLOAT_EQ(mirostat_mu_of(p), 10.0f);
  EXPECT_FLOAT_EQ(mirostat_next_mu(p, 0.5f), 10.4f);
  p.mirostat_eta = 0.0f;
  EXPECT_FLOAT_EQ(mirostat_next_mu(p, 0.5f), 10.0f);
}

TEST(Mirostat, StartsAtTwiceTauWhenNoMuIsGiven) {
  // p = 1/2, 1/4, 1/8, 1/8; tau 1.25 starts mu at 2.5: the two tokens within 2.5 bits.
  SamplingParams p = mirostat(2, 1.0f, std::numeric_limits<float>::quiet_NaN(), 1.25f);
  Distribution d;
  make_distribution(log_of({4, 2, 1, 1}), p, d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1}));
}

TEST(Mirostat, BadSettingsAndBadLogitsAreRefused) {
  SamplingParams p = mirostat(3, 1.0f, 10.0f);
  EXPECT_THROW(check_sampling_params(p), Error);
  p.mirostat = -1;
  EXPECT_THROW(check_sampling_params(p), Error);
  p.mirostat = 2;
  EXPECT_NO_THROW(check_sampling_params(p));
  p.mirostat_tau = -1.0f;
  EXPECT_THROW(check_sampling_params(p), Error);
  p.mirostat_tau = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(check_sampling_params(p), Error);
  p.mirostat_tau = 5.0f;
  p.mirostat_eta = kInf;
  EXPECT_THROW(check_sampling_params(p), Error);
  p.mirostat_eta = 0.1f;
  Distribution d;
  for (int version : {1, 2}) {
    p.mirostat = version;
    EXPECT_THROW(make_distribution(std::vector<float>{1.0f, std::nanf("")}, p, d), Error);
    EXPECT_THROW(make_distribution(std::vector<float>{-kInf, -kInf}, p, d), Error);
    make_distribution(std::vector<float>{0.5f}, p, d);
    EXPECT_EQ(d.ids, (std::vector<int32_t>{0}));
  }
}

}  // namespace
}  // namespace specdec
