#include "sampling/distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include "common/error.h"
#include "sampling/chi_square.h"

namespace specdec {
namespace {

SamplingParams no_filters(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// Logits whose softmax at T = 1 is exactly proportional to the given weights.
std::vector<float> log_of(std::vector<double> w) {
  std::vector<float> l;
  for (double x : w) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

void expect_dist(const Distribution& d, std::vector<int32_t> ids, std::vector<double> probs) {
  ASSERT_EQ(d.ids, ids);
  ASSERT_EQ(d.probs.size(), probs.size());
  for (size_t i = 0; i < probs.size(); ++i)
    EXPECT_NEAR(d.probs[i], probs[i], 1e-6) << "entry " << i;
}

// 0.4, 0.3, 0.2, 0.1 at T = 1.
const std::vector<float> kFour = log_of({4, 3, 2, 1});

TEST(Distribution, SoftmaxWithoutFilters) {
  Distribution d;
  make_distribution(kFour, no_filters(), d);
  EXPECT_EQ(d.n_vocab, 4);
  expect_dist(d, {0, 1, 2, 3}, {0.4, 0.3, 0.2, 0.1});
}

TEST(Distribution, TemperatureScalesLogits) {
  Distribution d;
  make_distribution(kFour, no_filters(0.5f), d);  // weights squared: 16, 9, 4, 1
  expect_dist(d, {0, 1, 2, 3}, {16 / 30.0, 9 / 30.0, 4 / 30.0, 1 / 30.0});
  make_distribution(kFour, no_filters(2.0f), d);  // square roots
  const double s = 2 + std::sqrt(3.0) + std::sqrt(2.0) + 1;
  expect_dist(d, {0, 1, 2, 3}, {2 / s, std::sqrt(3.0) / s, std::sqrt(2.0) / s, 1 / s});
}

TEST(Distribution, SortedDescendingTiesByAscendingId) {
  Distribution d;
  make_distribution(std::vector<float>{0, 1, 1, 0, 2}, no_filters(), d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{4, 1, 2, 0, 3}));
}

TEST(Distribution, TopKAlone) {
  SamplingParams p = no_filters();
  p.top_k = 2;
  Distribution d;
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1}, {4 / 7.0, 3 / 7.0});
  p.top_k = 4;  // k >= n keeps everything
  make_distribution(kFour, p, d);
  EXPECT_EQ(d.size(), 4u);
}

TEST(Distribution, TopKTiesAtTheBoundaryKeepLowestIds) {
  SamplingParams p = no_filters();
  p.top_k = 2;
  Distribution d;
  make_distribution(std::vector<float>{1, 2, 2, 2}, p, d);
  expect_dist(d, {1, 2}, {0.5, 0.5});
  // Same on the heap path (k * 8 <= n): 100 equal logits, the best 3 are ids 0, 1, 2.
  std::vector<float> flat(100, 0.0f);
  flat[57] = 1.0f;
  p.top_k = 4;
  make_distribution(flat, p, d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{57, 0, 1, 2}));
}

TEST(Distribution, TopPKeepsSmallestPrefixReachingP) {
  SamplingParams p = no_filters();
  Distribution d;
  p.top_p = 0.65f;  // 0.4 < 0.65 <= 0.7
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1}, {4 / 7.0, 3 / 7.0});
  p.top_p = 0.75f;  // needs the third token
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1, 2}, {4 / 9.0, 3 / 9.0, 2 / 9.0});
  p.top_p = 0.35f;  // the first token alone reaches it
  make_distribution(kFour, p, d);
  expect_dist(d, {0}, {1.0});
}

TEST(Distribution, MinPIsRelativeToTheMaximum) {
  SamplingParams p = no_filters();
  Distribution d;
  p.min_p = 0.3f;  // threshold 0.12: drops only 0.1
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1, 2}, {4 / 9.0, 3 / 9.0, 2 / 9.0});
  p.min_p = 0.6f;  // threshold 0.24
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1}, {4 / 7.0, 3 / 7.0});
  p.min_p = 2.0f;  // clamped: the maximum always survives
  make_distribution(kFour, p, d);
  expect_dist(d, {0}, {1.0});
}

TEST(Distribution, TopPIsMeasuredAfterTopK) {
  SamplingParams p = no_filters();
  Distribution d;
  p.top_p = 0.72f;  // on the full distribution: 0.4, 0.7, 0.9 -> keeps three
  make_distribution(kFour, p, d);
  EXPECT_EQ(d.size(), 3u);
  p.top_k = 3;  // renormalized top-3: 0.444, 0.778 -> keeps two
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1}, {4 / 7.0, 3 / 7.0});
}

TEST(Distribution, AllFiltersCombined) {
  // Weights 8, 6, 4, 3, 2, 1 (sum 24). top-k 5 -> mass 23. top-p 0.9 of 23 = 20.7: cumulative
  // 8, 14, 18, 21 -> keeps 4. min-p 0.45 -> threshold 3.6 in weight units: drops the 3.
  SamplingParams p = no_filters();
  p.top_k = 5;
  p.top_p = 0.9f;
  p.min_p = 0.45f;
  Distribution d;
  make_distribution(log_of({3, 8, 1, 6, 2, 4}), p, d);
  expect_dist(d, {1, 3, 5}, {8 / 18.0, 6 / 18.0, 4 / 18.0});
  p.min_p = 0.3f;  // threshold 2.4: top-p is now the binding filter
  make_distribution(log_of({3, 8, 1, 6, 2, 4}), p, d);
  expect_dist(d, {1, 3, 5, 0}, {8 / 21.0, 6 / 21.0, 4 / 21.0, 3 / 21.0});
}

TEST(Distribution, GreedyIsOneHotOnFirstMaximum) {
  SamplingParams p;
  p.temperature = 0.0f;
  Distribution d;
  make_distribution(std::vector<float>{1, 3, 3, 2}, p, d);
  expect_dist(d, {1}, {1.0});
  EXPECT_EQ(d.argmax(), 1);
  EXPECT_EQ(d.prob(1), 1.0f);
  EXPECT_EQ(d.prob(2), 0.0f);
}

TEST(Distribution, NegativeInfinityIsExcluded) {
  const float inf = std::numeric_limits<float>::infinity();
  Distribution d;
  make_distribution(std::vector<float>{-inf, 0.0f, -inf, 0.0f}, no_filters(), d);
  expect_dist(d, {1, 3}, {0.5, 0.5});
  EXPECT_THROW(make_distribution(std::vector<float>{-inf, -inf}, no_filters(), d), Error);
  EXPECT_THROW(make_distribution(std::vector<float>{0.0f, std::nanf("")}, no_filters(), d), Error);
}

TEST(Distribution, ProbLookup) {
  Distribution d;
  make_distribution(kFour, no_filters(), d);
  EXPECT_NEAR(d.prob(2), 0.2, 1e-6);
  EXPECT_EQ(d.prob(17), 0.0f);
}

// Straightforward reference: full sort, then the filters one after another as llama.cpp does
// (top-n-sigma, top-k, typical, top-p, min-p, XTC), each on the list the previous one left.
Distribution reference(const std::vector<float>& logits, const SamplingParams& p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  // With the temperature last every filter measures the weights at temperature 1.
  const double filter_t = p.temperature_last ? 1.0 : double(p.temperature);
  std::vector<double> w;
  for (int32_t id : ids) {
    w.push_back(std::exp((double(logits[size_t(id)]) - logits[size_t(ids[0])]) / filter_t));
  }
  // Entries (rank, weight) still in play, in rank order; rank indexes ids and w.
  std::vector<size_t> live;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (w[i] > 0) live.push_back(i);
  }
  if (p.top_n_sigma > 0) {
    double sum = 0, acc = 0;
    int count = 0;
    for (float l : logits) {
      if (std::isfinite(l)) sum += l, ++count;
    }
    const double mean = sum / count;
    for (float l : logits) {
      if (std::isfinite(l)) acc += (l - mean) * (l - mean);
    }
    const double floor = logits[size_t(ids[0])] - double(p.top_n_sigma) * std::sqrt(acc / count);
    std::erase_if(live, [&](size_t r) { return logits[size_t(ids[r])] < float(floor); });
  }
  // top-n-sigma's survivors are a prefix of the ranks, so the first k ranks are its first k.
  if (p.top_k > 0) std::erase_if(live, [&](size_t r) { return r >= size_t(p.top_k); });
  const auto mass_of = [&] {
    double m = 0;
    for (size_t r : live) m += w[r];
    return m;
  };
  if (p.typical_p < 1 && live.size() > 1) {
    const double mass = mass_of();
    double h = 0;
    for (size_t r : live) h -= w[r] / mass * std::log(w[r] / mass);
    std::vector<size_t> order = live;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::abs(-std::log(w[a] / mass) - h) < std::abs(-std::log(w[b] / mass) - h);
    });
    double cum = 0;
    size_t cut = order.size();
    for (size_t i = 0; i < order.size(); ++i) {
      cum += w[order[i]] / mass;
      if (cum > double(p.typical_p)) {
        cut = i + 1;
        break;
      }
    }
    order.resize(cut);
    std::sort(order.begin(), order.end());
    live = order;
  }
  if (p.top_p < 1) {
    const double mass = mass_of();
    double cum = 0;
    for (size_t i = 0; i < live.size(); ++i) {
      cum += w[live[i]];
      if (cum >= double(p.top_p) * mass) {
        live.resize(i + 1);
        break;
      }
    }
  }
  double w_max = 0;
  for (size_t r : live) w_max = std::max(w_max, w[r]);
  const double min_p = std::min(1.0, double(std::max(0.0f, p.min_p)));
  std::erase_if(live, [&](size_t r) { return w[r] < min_p * w_max; });
  const bool xtc = p.xtc_probability > 0 && p.xtc_threshold <= 0.5f;
  // XTC's top choices: with the temperature last, measured at temperature 1, before it.
  const auto xtc_top_of = [&](const std::vector<double>& probs) {
    size_t top = 0;
    while (top < probs.size() && float(probs[top]) >= p.xtc_threshold) ++top;
    return top;
  };
  std::optional<size_t> xtc_top;
  if (xtc && p.temperature_last) {
    std::vector<double> at_one;
    const double mass = mass_of();
    for (size_t r : live) at_one.push_back(w[r] / mass);
    xtc_top = xtc_top_of(at_one);
  }
  if (p.temperature_last && p.dynatemp_range <= 0 && live.size() > 1) {
    const double top = logits[size_t(ids[live[0]])];
    for (size_t r : live) w[r] = std::exp((logits[size_t(ids[r])] - top) / double(p.temperature));
    std::erase_if(live, [&](size_t r) { return !(w[r] > 0); });
  }
  if (p.dynatemp_range > 0 && live.size() > 1) {
    // Entropy at temperature 1 of the survivors, over its most: the temperature between T -
    // range and T + range; the survivors' weights at it.
    const double top = logits[size_t(ids[live[0]])];
    double z = 0, h = 0;
    for (size_t r : live) z += std::exp(logits[size_t(ids[r])] - top);
    for (size_t r : live) {
      const double q = std::exp(logits[size_t(ids[r])] - top) / z;
      if (q > 0) h -= q * std::log(q);
    }
    const double lo = std::max(0.0, double(p.temperature) - p.dynatemp_range);
    const double hi = double(p.temperature) + p.dynatemp_range;
    const double t =
        lo + (hi - lo) * std::pow(h / std::log(double(live.size())), double(p.dynatemp_exponent));
    if (t > 0) {
      for (size_t r : live) w[r] = std::exp((logits[size_t(ids[r])] - top) / t);
      std::erase_if(live, [&](size_t r) { return !(w[r] > 0); });
    } else {
      live.resize(1);
    }
  }
  Distribution d;
  d.n_vocab = n;
  const double total = mass_of();
  std::vector<double> probs;
  for (size_t r : live) probs.push_back(w[r] / total);
  bool mixed = false;
  if (xtc && probs.size() > 1) {
    const size_t top = std::min(xtc_top.value_or(xtc_top_of(probs)), probs.size());
    if (top >= 2) {
      mixed = true;
      // With probability P the choices above the threshold but the last are removed.
      double rest = 0;
      for (size_t i = top - 1; i < probs.size(); ++i) rest += probs[i];
      const double chance = p.xtc_probability;
      for (size_t i = 0; i < probs.size(); ++i) {
        probs[i] = (1 - chance) * probs[i] + (i + 1 >= top ? chance * probs[i] / rest : 0.0);
      }
    }
  }
  std::vector<size_t> order(live.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // After the mixture the order is by probability again (ties: ascending id).
  if (mixed)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return float(probs[a]) > float(probs[b]) ||
             (float(probs[a]) == float(probs[b]) && ids[live[a]] < ids[live[b]]);
    });
  for (size_t i : order) {
    if (float(probs[i]) <= 0) continue;
    d.ids.push_back(ids[live[i]]);
    d.probs.push_back(float(probs[i]));
  }
  return d;
}

TEST(Distribution, TopNSigmaKeepsLogitsWithinNDeviationsOfTheMax) {
  // Mean 0.5, population standard deviation sqrt(35/12) = 1.708: with n = 1 the floor is 1.29.
  const std::vector<float> logits{3, 2, 1, 0, -1, -2};
  SamplingParams p = no_filters();
  p.top_n_sigma = 1.0f;
  Distribution d;
  make_distribution(logits, p, d);
  const double e = std::exp(1.0);
  expect_dist(d, {0, 1}, {e / (e + 1), 1 / (e + 1)});
  // The temperature scales the logits and the deviation alike: the same two survive.
  p.temperature = 0.5f;
  make_distribution(logits, p, d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1}));
  // Masked (-inf) logits do not count for the deviation: 3 and 2 alone have sd 0.5, so n = 1.5
  // puts the floor at 2.25 (only 3 stays) and n = 2.5 at 1.75 (both stay).
  p.temperature = 1.0f;
  p.top_n_sigma = 1.5f;
  const float inf = std::numeric_limits<float>::infinity();
  make_distribution(std::vector<float>{3, 2, -inf, -inf}, p, d);
  expect_dist(d, {0}, {1.0});
  p.top_n_sigma = 2.5f;  // floor 1.75
  make_distribution(std::vector<float>{3, 2, -inf, -inf}, p, d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1}));
}

TEST(Distribution, TypicalKeepsTheTokensNearestTheEntropy) {
  // p = 0.5, 0.2, 0.15, 0.15: H = 1.238 nats; |-log p - H| = 0.544, 0.372, 0.659, 0.659, so the
  // order is id 1, id 0, then ids 2 and 3.
  const std::vector<float> logits = log_of({10, 4, 3, 3});
  SamplingParams p = no_filters();
  p.typical_p = 0.5f;  // 0.2, then 0.7 > 0.5
  Distribution d;
  make_distribution(logits, p, d);
  expect_dist(d, {0, 1}, {0.5 / 0.7, 0.2 / 0.7});
  p.typical_p = 0.1f;  // the most likely token is not the most typical one
  make_distribution(logits, p, d);
  expect_dist(d, {1}, {1.0});
  // min-p after typical is relative to the typical set's most likely entry (0.2 / 0.5 < 0.5).
  p.typical_p = 0.5f;
  p.min_p = 0.5f;
  make_distribution(logits, p, d);
  expect_dist(d, {0}, {1.0});
  // top-p after typical measures the typical set's mass: 0.5 / 0.7 >= 0.6.
  p.min_p = 0.0f;
  p.top_p = 0.6f;
  make_distribution(logits, p, d);
  expect_dist(d, {0}, {1.0});
  // After top-k the entropy is the survivors': top-2 leaves 5/7 and 2/7 (H 0.598, scores 0.26 and
  // 0.65), so id 0 comes first and alone holds more than 0.5.
  p.top_p = 1.0f;
  p.top_k = 2;
  make_distribution(logits, p, d);
  expect_dist(d, {0}, {1.0});
}

TEST(Distribution, XtcIsTheMixtureOfExcludingTheTopChoicesAndNot) {
  // 0.4, 0.3, 0.2, 0.1; threshold 0.25 makes ids 0 and 1 top choices, and id 1 (the last) stays.
  SamplingParams p = no_filters();
  p.xtc_threshold = 0.25f;
  p.xtc_probability = 0.5f;
  Distribution d;
  make_distribution(kFour, p, d);
  // id 0: 0.5 * 0.4; the others: p * (0.5 + 0.5 / 0.6).
  const double up = 0.5 + 0.5 / 0.6;
  expect_dist(d, {1, 2, 0, 3}, {0.3 * up, 0.2 * up, 0.2, 0.1 * up});
  p.xtc_probability = 1.0f;  // always: id 0 is gone
  make_distribution(kFour, p, d);
  expect_dist(d, {1, 2, 3}, {0.5, 2 / 6.0, 1 / 6.0});
  p.xtc_threshold = 0.35f;  // one top choice: nothing to exclude
  make_distribution(kFour, p, d);
  expect_dist(d, {0, 1, 2, 3}, {0.4, 0.3, 0.2, 0.1});
  p.xtc_threshold = 0.6f;  // above 0.5: off, as in llama.cpp
  p.xtc_probability = 1.0f;
  EXPECT_FALSE(p.xtc_active());
}

// llama.cpp draws XTC's coin and then samples; the distribution here must be that procedure's.
TEST(Distribution, XtcMatchesTheCoinThenSampleProcedure) {
  const std::vector<float> logits = log_of({6, 5, 4, 2, 1, 1});
  SamplingParams p = no_filters(0.8f);
  p.xtc_threshold = 0.15f;
  p.xtc_probability = 0.4f;
  Distribution mixed, plain;
  make_distribution(logits, p, mixed);
  SamplingParams off = p;
  off.xtc_probability = 0.0f;
  make_distribution(logits, off, plain);
  Rng rng(77);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < 60000; ++i) {
    Distribution d = plain;
    if (rng.uniform() < double(p.xtc_probability)) {
      size_t top = 0;
      while (top < d.probs.size() && d.probs[top] >= p.xtc_threshold) ++top;
      if (top >= 2) {
        d.ids.erase(d.ids.begin(), d.ids.begin() + static_cast<ptrdiff_t>(top - 1));
        d.probs.erase(d.probs.begin(), d.probs.begin() + static_cast<ptrdiff_t>(top - 1));
        const double s = std::accumulate(d.probs.begin(), d.probs.end(), 0.0);
        for (float& q : d.probs) q = static_cast<float>(q / s);
      }
    }
    ++counts[static_cast<size_t>(sample(d, rng))];
  }
  std::vector<double> expected(logits.size(), 0.0);
  for (size_t i = 0; i < mixed.size(); ++i) expected[size_t(mixed.ids[i])] = mixed.probs[i];
  const ChiSquareResult r = chi_square_test(counts, expected);
  EXPECT_EQ(r.impossible, 0);
  EXPECT_GT(r.p_value, 1e-4) << "stat " << r.stat;
  // And the mixture differs from plain sampling by far more than the noise.
  std::vector<double> unmixed(logits.size(), 0.0);
  for (size_t i = 0; i < plain.size(); ++i) unmixed[size_t(plain.ids[i])] = plain.probs[i];
  EXPECT_LT(chi_square_test(counts, unmixed).p_value, 1e-9);
}

TEST(Distribution, DynamicTemperatureFollowsTheSurvivorsEntropy) {
  // 0 and -1: at temperature 1 p = 0.731, 0.269, H = 0.5822 nats, 0.840 of log 2; with T 1 and
  // range 0.5 the temperature is 0.5 + 1.0 * 0.840 = 1.340.
  const std::vector<float> logits{0.0f, -1.0f};
  SamplingParams p = no_filters(1.0f);
  p.dynatemp_range = 0.5f;
  Distribution d;
  make_distribution(logits, p, d);
  const double h =
      -(std::log(1 / (1 + std::exp(-1.0))) / (1 + std::exp(-1.0)) +
        std::log(std::exp(-1.0) / (1 + std::exp(-1.0))) * std::exp(-1.0) / (1 + std::exp(-1.0)));
  const double t = 0.5 + 1.0 * h / std::log(2.0);
  EXPECT_NEAR(t, 1.340, 1e-3);
  const double w = std::exp(-1.0 / t);
  expect_dist(d, {0, 1}, {1 / (1 + w), w / (1 + w)});
  // Exponent 0: always the highest temperature; a range reaching 0 with the exponent large: a
  // temperature near 0 (2 * 0.84^200), which leaves the largest logit only.
  p.dynatemp_exponent = 0.0f;
  make_distribution(logits, p, d);
  expect_dist(d, {0, 1}, {1 / (1 + std::exp(-1 / 1.5)), 1 - 1 / (1 + std::exp(-1 / 1.5))});
  p.dynatemp_range = 1.0f;
  p.dynatemp_exponent = 200.0f;
  make_distribution(logits, p, d);
  expect_dist(d, {0}, {1.0});
}

// llama.cpp's order: the filters measure softmax(logits), the temperature re-weights what they
// keep. 0.4, 0.3, 0.2, 0.1 at T 0.5 are 16, 9, 4, 1 (/ 30).
TEST(Distribution, TemperatureLastFiltersAtTemperatureOne) {
  SamplingParams first = no_filters(0.5f);
  first.top_p = 0.75f;
  SamplingParams last = first;
  last.temperature_last = true;
  Distribution d;
  make_distribution(kFour, first, d);  // 0.533 + 0.3 reach 0.75
  expect_dist(d, {0, 1}, {16 / 25.0, 9 / 25.0});
  make_distribution(kFour, last, d);  // 0.4 + 0.3 + 0.2 reach it at temperature 1
  expect_dist(d, {0, 1, 2}, {16 / 29.0, 9 / 29.0, 4 / 29.0});

  first.top_p = last.top_p = 1.0f;
  first.min_p = last.min_p = 0.4f;
  make_distribution(kFour, first, d);  // 9 / 16 >= 0.4 > 4 / 16
  expect_dist(d, {0, 1}, {16 / 25.0, 9 / 25.0});
  make_distribution(kFour, last, d);  // 2 / 4 >= 0.4 > 1 / 4
  expect_dist(d, {0, 1, 2}, {16 / 29.0, 9 / 29.0, 4 / 29.0});

  // XTC's top choices too: at threshold 0.15 three of them at temperature 1, two at 0.5.
  first.min_p = last.min_p = 0.0f;
  first.xtc_probability = last.xtc_probability = 1.0f;
  first.xtc_threshold = last.xtc_threshold = 0.15f;
  make_distribution(kFour, first, d);
  expect_dist(d, {1, 2, 3}, {9 / 14.0, 4 / 14.0, 1 / 14.0});
  make_distribution(kFour, last, d);
  expect_dist(d, {2, 3}, {0.8, 0.2});

  // At temperature 1 the two orders are one; greedy is greedy in either.
  for (float t : {1.0f, 0.0f}) {
    Distribution a;
    SamplingParams one = no_filters(t);
    one.top_p = 0.75f;
    one.min_p = 0.2f;
    SamplingParams one_last = one;
    one_last.temperature_last = true;
    make_distribution(kFour, one, a);
    make_distribution(kFour, one_last, d);
    EXPECT_EQ(a.ids, d.ids) << "T " << t;
    EXPECT_EQ(a.probs, d.probs) << "T " << t;
  }
}

TEST(Distribution, FilterValuesOutsideTheirRangesAreRefused) {
  SamplingParams p;
  EXPECT_NO_THROW(check_sampling_params(p));
  const auto refused = [](SamplingParams q, const char* name) {
    try {
      check_sampling_params(q);
    } catch (const Error& e) {
      return std::string(e.what()).find(name) != std::string::npos;
    }
    return false;
  };
  SamplingParams q = p;
  q.typical_p = -0.1f;
  EXPECT_TRUE(refused(q, "typical_p"));
  q.typical_p = std::nanf("");
  EXPECT_TRUE(refused(q, "typical_p"));
  q.typical_p = 1.5f;  // off, as in llama.cpp
  EXPECT_NO_THROW(check_sampling_params(q));
  q = p;
  q.top_n_sigma = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(refused(q, "top_n_sigma"));
  q = p;
  q.xtc_probability = -0.1f;
  EXPECT_TRUE(refused(q, "xtc_probability"));
  q = p;
  q.xtc_threshold = std::nanf("");
  EXPECT_TRUE(refused(q, "xtc_threshold"));
  q = p;
  q.dynatemp_range = -1.0f;
  EXPECT_TRUE(refused(q, "dynatemp_range"));
  q = p;
  q.dynatemp_exponent = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(refused(q, "dynatemp_exponent"));
}

TEST(Distribution, MatchesFullSortReferenceOnRandomInputs) {
  Rng rng(5);
  Distribution d;
  for (int trial = 0; trial < 600; ++trial) {
    const int n = 1 + static_cast<int>(rng.uniform() * (trial % 3 == 0 ? 2000 : 60));
    std::vector<float> logits(static_cast<size_t>(n));
    const bool quantized = trial % 2 == 0;  // many exact ties
    for (float& l : logits) {
      const double x = rng.uniform() * 12 - 6;
      l = quantized ? std::round(static_cast<float>(x)) : static_cast<float>(x);
    }
    SamplingParams p;
    p.temperature = static_cast<float>(0.2 + rng.uniform() * 1.8);
    p.top_k = rng.uniform() < 0.3 ? 0 : 1 + static_cast<int>(rng.uniform() * n * 1.2);
    p.top_p = rng.uniform() < 0.3 ? 1.0f : static_cast<float>(0.05 + rng.uniform());
    p.min_p = rng.uniform() < 0.3 ? 0.0f : static_cast<float>(rng.uniform() * 0.3);
    if (trial >= 100) {  // llama.cpp's further filters, each on in about half the trials
      p.typical_p = rng.uniform() < 0.5 ? 1.0f : static_cast<float>(0.1 + rng.uniform() * 0.9);
      p.top_n_sigma = rng.uniform() < 0.5 ? -1.0f : static_cast<float>(0.3 + rng.uniform() * 3);
      p.xtc_probability = rng.uniform() < 0.5 ? 0.0f : static_cast<float>(rng.uniform());
      p.xtc_threshold = static_cast<float>(0.02 + rng.uniform() * 0.5);
      p.dynatemp_range = rng.uniform() < 0.5 ? 0.0f : static_cast<float>(rng.uniform() * 1.5);
      p.dynatemp_exponent = static_cast<float>(0.5 + rng.uniform() * 2);
    }
    p.temperature_last = trial % 4 == 1 || trial % 4 == 2;
    make_distribution(logits, p, d);
    const Distribution r = reference(logits, p);
    ASSERT_EQ(d.ids, r.ids) << "trial " << trial;
    for (size_t i = 0; i < r.probs.size(); ++i) ASSERT_NEAR(d.probs[i], r.probs[i], 1e-6);
  }
}

// Top-p over a whole vocabulary first looks for its prefix among the largest weights only
// (distribution.cpp); on vocabulary-sized rows, peaked like a model's and flat, with ties, the
// result must still be exactly the full sort's.
TEST(Distribution, MatchesFullSortReferenceOnLargeVocabularies) {
  Rng rng(11);
  Distribution d;
  for (int trial = 0; trial < 42; ++trial) {
    const int n = 49152;
    std::vector<float> logits(static_cast<size_t>(n));
    const double spread = trial % 3 == 0 ? 2.0 : 12.0;  // flat rows need most of the vocabulary
    for (float& l : logits) l = static_cast<float>(rng.uniform() * spread - spread);
    for (int j = 0; j < 1 + trial % 5; ++j) {  // a few strong candidates, some tied
      logits[static_cast<size_t>(rng.uniform() * n)] = static_cast<float>(4 + j % 2);
    }
    SamplingParams p;
    p.temperature = std::array{0.3f, 0.7f, 1.0f, 1.5f}[static_cast<size_t>(trial % 4)];
    p.top_k = 0;
    // Top-p 1 with min-p 0 is unfiltered sampling: the whole vocabulary gets sorted.
    p.top_p = std::array{0.5f, 0.9f, 0.95f, 0.99f, 0.999f, 1.0f}[static_cast<size_t>(trial % 6)];
    p.min_p = trial % 4 < 2 ? 0.0f : 0.001f;
    if (trial >= 24) {  // typical sampling over the whole vocabulary finds its set by a bound
      p.typical_p = std::array{0.2f, 0.9f, 0.99f}[static_cast<size_t>(trial % 3)];
      p.top_n_sigma = trial % 2 == 0 ? 2.0f : -1.0f;
    }
    if (trial % 8 == 7) {  // signed zeros and negative logits tie the way the comparison says
      for (size_t i = 0; i < 300; ++i) logits[i * 7] = i % 2 == 0 ? -0.0f : 0.0f;
    }
    p.temperature_last = trial % 5 == 1;
    make_distribution(logits, p, d);
    const Distribution r = reference(logits, p);
    ASSERT_EQ(d.ids, r.ids) << "trial " << trial;
    for (size_t i = 0; i < r.probs.size(); ++i) ASSERT_NEAR(d.probs[i], r.probs[i], 1e-6);
  }
}

TEST(Distribution, ReusesBuffersAcrossCalls) {
  Distribution d;
  make_distribution(std::vector<float>(1000, 0.0f), no_filters(), d);
  make_distribution(kFour, no_filters(), d);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.n_vocab, 4);
}

TEST(Sample, MatchesProbabilitiesChiSquare) {
  Distribution d;
  SamplingParams p = no_filters(0.9f);
  make_distribution(std::vector<float>{0.3f, -1.0f, 2.0f, 0.0f, 1.1f, -3.0f, 0.7f}, p, d);
  Rng rng(2024);
  const int n = 200000;
  std::vector<int64_t> counts(7, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sample(d, rng))];
  std::vector<double> probs(7);
  for (int32_t id = 0; id < 7; ++id) probs[size_t(id)] = d.prob(id);
  const ChiSquareResult r = chi_square_test(counts, probs);
  EXPECT_GT(r.p_value, 1e-3) << "stat " << r.stat;
  // And it is a proper test: sampling from a shifted distribution is rejected.
  std::vector<double> wrong = probs;
  std::swap(wrong[0], wrong[3]);
  EXPECT_LT(chi_square_test(counts, wrong).p_value, 1e-9);
}

TEST(Sample, SameSeedSameDraws) {
  Distribution d;
  make_distribution(kFour, no_filters(), d);
  Rng a(3), b(3);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sample(d, a), sample(d, b));
}

TEST(Sample, NeverReturnsZeroProbabilityIds) {
  Distribution d;
  d.n_vocab = 3;
  d.ids = {2, 0, 1};
  d.probs = {0.6f, 0.4f, 0.0f};
  Rng rng(1);
  for (int i = 0; i < 10000; ++i) ASSERT_NE(sample(d, rng), 1);
}

TEST(Distribution, LargeVocabTiming) {
  // Not a benchmark; reports what a 150k vocabulary costs with the default filters (top-k set)
  // and with top-p only, so regressions to a full sort are visible in the test log.
  const int n = 150000;
  std::vector<float> logits(n);
  Rng rng(8);
  for (float& l : logits) l = static_cast<float>(rng.uniform() * 20 - 10);
  Distribution d;
  for (const bool with_k : {true, false}) {
    SamplingParams p;
    if (!with_k) p.top_k = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const int reps = 20;
    for (int i = 0; i < reps; ++i) make_distribution(logits, p, d);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        reps;
    std::printf("150k vocab, top_k=%d: %.3f ms per distribution, support %zu\n", p.top_k, ms,
                d.size());
    EXPECT_GT(d.size(), 0u);
  }
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

TEST(Overlap, IsSumOfMinimaOverTheUnionOfSupports) {
  Distribution a{{0, 1, 2}, {0.5f, 0.3f, 0.2f}, 4};
  Distribution b{{1, 3, 0}, {0.6f, 0.3f, 0.1f}, 4};
  // min over ids: 0 -> 0.1, 1 -> 0.3, 2 -> 0, 3 -> 0
  EXPECT_NEAR(overlap(a, b), 0.4, 1e-6);
  EXPECT_NEAR(overlap(b, a), 0.4, 1e-6);
  EXPECT_NEAR(overlap(a, a), 1.0, 1e-6);
  Distribution c{{3}, {1.0f}, 4};
  EXPECT_NEAR(overlap(a, c), 0.0, 1e-6);
}

}  // namespace
}  // namespace specdec
