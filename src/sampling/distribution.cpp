// make_distribution: softmax + llama.cpp's filter chain without sorting the whole vocabulary.
//
// Every filter keeps a prefix of the candidates in one fixed order (descending logit, ties to the
// ascending id; dividing by T > 0 and exp are monotone, so this is also the order of the
// probabilities):
//   top-k keeps the first k;
//   top-p keeps the shortest prefix whose mass, relative to the top-k survivors, reaches p;
//   min-p keeps those with p_i >= min_p * p_max, and p_max (the first entry) survives every filter.
// A chain of prefix filters keeps the shortest of the prefixes, so the filters commute except for
// the one coupling: top-p measures mass relative to the top-k survivors. That lets us
//   1. select the top k with a heap scan (O(n), no sort),
//   2. drop everything below the min-p threshold while accumulating the mass top-p needs,
//   3. sort the survivors only as far as top-p needs, in growing chunks (nth_element + sort),
//      starting from the candidates with the largest weights when there is no top-k.
// Only the unfiltered case (no top-k, top-p, min-p) sorts the whole vocabulary (a radix sort).
#include "sampling/distribution.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.h"
#include "tensor/vec_ops.h"

namespace specdec {

namespace {

// Strict total order "a ranks before b": higher logit first, then the lower id.
struct RanksBefore {
  const float* logit;
  bool operator()(int32_t a, int32_t b) const {
    return logit[a] > logit[b] || (logit[a] == logit[b] && a < b);
  }
};

// Leaves the k best ids (unordered) in ids.
void select_top_k(std::span<const float> logits, int32_t k, std::vector<int32_t>& ids) {
  const RanksBefore before{logits.data()};
  const auto n = static_cast<int32_t>(logits.size());
  ids.resize(static_cast<size_t>(k));
  std::iota(ids.begin(), ids.end(), 0);
  if (static_cast<int64_t>(k) * 8 > n) {
    // Large k: a heap would churn; quickselect over all ids is O(n) as well.
    ids.resize(static_cast<size_t>(n));
    std::iota(ids.begin() + k, ids.end(), k);
    std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), before);
    ids.resize(static_cast<size_t>(k));
    return;
  }
  // Heap of the best k seen so far with the worst at the front. Later ids lose ties to every id
  // already in the heap, so the scan only needs a strict > against the front's logit.
  std::make_heap(ids.begin(), ids.end(), before);
  float threshold = logits[static_cast<size_t>(ids.front())];
  for (int32_t i = k; i < n; ++i) {
    if (logits[static_cast<size_t>(i)] > threshold) {
      std::pop_heap(ids.begin(), ids.end(), before);
      ids.back() = i;
      std::push_heap(ids.begin(), ids.end(), before);
      threshold = logits[static_cast<size_t>(ids.front())];
    }
  }
}

// Sorts ids only as far as needed for the cumulative weight to reach target and returns the
// length of that prefix (ids.size() if it is never reached).
template <typename Weight>
size_t sorted_prefix_reaching(std::vector<int32_t>& ids, const RanksBefore& before,
                              const Weight& weight, double target) {
  size_t sorted = 0, chunk = 32;
  double cum = 0;
  while (sorted < ids.size()) {
    const size_t end = std::min(ids.size(), sorted + chunk);
    if (end < ids.size()) {
      std::nth_element(ids.begin() + static_cast<ptrdiff_t>(sorted),
                       ids.begin() + static_cast<ptrdiff_t>(end - 1), ids.end(), before);
    }
    std::sort(ids.begin() + static_cast<ptrdiff_t>(sorted),
              ids.begin() + static_cast<ptrdiff_t>(end), before);
    for (size_t i = sorted; i < end; ++i) {
      cum += weight(ids[i]);
      if (cum >= target) return i + 1;
    }
    sorted = end;
    chunk *= 2;
  }
  return ids.size();
}

// Sorts ids into RanksBefore order (higher logit first, then the lower id) by an LSD radix sort
// of 64-bit keys: the logit's bits made to sort descending as unsigned integers, then the id.
// A comparison sort of a whole vocabulary through the logits (unfiltered sampling) cost ~5 ms
// per token on SmolLM2's 49k; this is a few passes over the array.
void radix_sort_ranks(std::vector<int32_t>& ids, std::span<const float> logits) {
  thread_local std::vector<uint64_t> keys, tmp;
  keys.resize(ids.size());
  tmp.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    float l = logits[static_cast<size_t>(ids[i])];
    if (l == 0.0f) l = 0.0f;  // -0 ties with +0, as the comparison order has it
    const uint32_t bits = std::bit_cast<uint32_t>(l);
    // Ascending unsigned order of `up` is ascending float order; its complement, descending.
    const uint32_t up = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
    keys[i] = (static_cast<uint64_t>(~up) << 32) | static_cast<uint32_t>(ids[i]);
  }
  constexpr int kDigitBits = 11;  // 6 passes cover 64 bits; passes whose digit is constant skip
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  for (int shift = 0; shift < 64; shift += kDigitBits) {
    std::array<size_t, kBuckets> count{};
    for (uint64_t k : keys) ++count[(k >> shift) & (kBuckets - 1)];
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == keys.size()) continue;
    size_t sum = 0;
    for (size_t& c : count) {
      const size_t n = c;
      c = sum;
      sum += n;
    }
    for (uint64_t k : keys) tmp[count[(k >> shift) & (kBuckets - 1)]++] = k;
    keys.swap(tmp);
  }
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(keys[i] & 0xffffffffu);
}

void make_one_hot(std::span<const float> logits, Distribution& out) {
  // First strict maximum: ties go to the lowest id. NaN never compares greater, so it is skipped.
  const int64_t best = argmax_f32(logits.data(), static_cast<int64_t>(logits.size()));
  out.ids.assign(1, static_cast<int32_t>(best));
  out.probs.assign(1, 1.0f);
}

}  // namespace

float Distribution::prob(int32_t id) const {
  // Linear scan: with top-k the support is tiny; without filters it is O(n_vocab), which is the
  // same order as producing the distribution in the first place.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0f;
}

void make_distribution(std::span<const float> logits, const SamplingParams& params,
                       Distribution& out) {
  if (logits.empty()) fail("make_distribution: empty logits");
  const auto n = static_cast<int32_t>(logits.size());
  out.n_vocab = n;
  if (params.greedy()) {
    make_one_hot(logits, out);
    return;
  }

  const float max_logit = max_f32(logits.data(), n);
  if (std::isnan(max_logit)) fail("make_distribution: NaN logit");
  if (std::isinf(max_logit)) fail("make_distribution: logits have no finite maximum");

  // Unnormalized probabilities relative to the maximum: w = exp((l - max) / T) in (0, 1], computed
  // in double so that neither a tiny T nor a wide logit range loses the ordering of the mass.
  // Each is computed once and kept (a row per thread, reused: no allocation once warm).
  const double m = max_logit, inv_t = 1.0 / static_cast<double>(params.temperature);
  thread_local std::vector<double> weights;
  if (weights.size() < static_cast<size_t>(n)) weights.resize(static_cast<size_t>(n));
  const auto weight = [&](int32_t id) { return weights[static_cast<size_t>(id)]; };
  const auto compute = [&](int32_t id) {
    const double w = std::exp((static_cast<double>(logits[static_cast<size_t>(id)]) - m) * inv_t);
    weights[static_cast<size_t>(id)] = w;
    return w;
  };
  // min-p: p_i >= min_p * p_max  <=>  w_i >= min_p, since p_max has w = 1. Weights that underflow
  // to 0 can never be sampled, so they are dropped with the same test. min_p > 1 is clamped so the
  // maximum always survives.
  const double w_min = std::min(1.0, std::max(0.0, static_cast<double>(params.min_p)));
  const auto keep = [w_min](double w) { return w > 0 && w >= w_min; };

  std::vector<int32_t>& ids = out.ids;
  double mass = 0;  // total weight after top-k: what top-p's threshold is relative to
  if (params.top_k > 0 && params.top_k < n) {
    select_top_k(logits, params.top_k, ids);
    size_t kept = 0;
    for (int32_t id : ids) {
      const double w = compute(id);
      mass += w;
      if (keep(w)) ids[kept++] = id;
    }
    ids.resize(kept);
  } else {
    // The same exps, several at a time (bit for bit std::exp's).
    exp_shifted_scaled_f64(logits.data(), n, m, inv_t, weights.data());
    // Top-p over the whole vocabulary: its prefix lies among the largest weights (w is monotone
    // in the logit, so every w >= tau ranks before every w < tau). If the candidates with
    // w >= tau already hold the target mass, with a margin far above the rounding of summing
    // them in another order, the prefix found among them is the one the whole list gives, after
    // the same additions in the same order; the cut-off tau is lowered until that holds. Sorting
    // a few hundred candidates instead of the vocabulary is most of a T > 0 token's sampling.
    // The first scan also sums the mass, in index order: that sum is a chain of dependent adds,
    // and the comparisons and appends run alongside it instead of in a pass of their own.
    double tau = params.top_p < 1.0f ? 1e-3 : 0.0;
    for (bool first = true;; first = false) {
      ids.clear();
      double held = 0;
      for (int32_t i = 0; i < n; ++i) {
        const double w = weights[static_cast<size_t>(i)];
        if (first) mass += w;
        if (keep(w) && w >= tau) {
          ids.push_back(i);
          held += w;
        }
      }
      if (tau == 0.0 || held >= static_cast<double>(params.top_p) * mass * (1 + 1e-9)) break;
      tau = tau > 1e-9 ? tau * 1e-3 : 0.0;
    }
  }

  const RanksBefore before{logits.data()};
  size_t cut = ids.size();
  if (params.top_p < 1.0f && ids.size() > 1) {
    cut = sorted_prefix_reaching(ids, before, weight, static_cast<double>(params.top_p) * mass);
  } else {
    if (ids.size() > 2048) {
      radix_sort_ranks(ids, logits);
    } else {
      std::sort(ids.begin(), ids.end(), before);
    }
  }
  ids.resize(cut);

  out.probs.resize(cut);
  double total = 0;
  for (size_t i = 0; i < cut; ++i) total += weight(ids[i]);
  const double inv_total = 1.0 / total;
  for (size_t i = 0; i < cut; ++i) {
    out.probs[i] = static_cast<float>(weight(ids[i]) * inv_total);
  }
}

int32_t sample(const Distribution& dist, Rng& rng) {
  if (dist.ids.empty()) fail("sample: empty distribution");
  // Inverse CDF: the first entry whose cumulative probability exceeds u.
  const double u = rng.uniform();
  double cum = 0;
  for (size_t i = 0; i < dist.probs.size(); ++i) {
    cum += dist.probs[i];
    if (u < cum) return dist.ids[i];
  }
  // The float probabilities may sum to slightly less than 1 and u can land in that sliver; give
  // it to the last entry that has mass (never to a zero-probability id).
  for (size_t i = dist.probs.size(); i-- > 0;) {
    if (dist.probs[i] > 0) return dist.ids[i];
  }
  return dist.ids.front();
}

}  // namespace specdec

namespace specdec {

double overlap(const Distribution& a, const Distribution& b) {
  // A dense scratch row makes this O(|a| + |b|) instead of O(|a| * |b|) for unfiltered
  // distributions over a whole vocabulary.
  thread_local std::vector<float> dense;
  int32_t n = std::max(a.n_vocab, b.n_vocab);
  for (int32_t id : a.ids) n = std::max(n, id + 1);
  for (int32_t id : b.ids) n = std::max(n, id + 1);
  if (dense.size() < static_cast<size_t>(n)) dense.resize(static_cast<size_t>(n), 0.0f);
  for (size_t i = 0; i < b.ids.size(); ++i) dense[static_cast<size_t>(b.ids[i])] = b.probs[i];
  double sum = 0.0;
  for (size_t i = 0; i < a.ids.size(); ++i) {
    sum += std::min(a.probs[i], dense[static_cast<size_t>(a.ids[i])]);
  }
  for (int32_t id : b.ids) dense[static_cast<size_t>(id)] = 0.0f;
  return sum;
}

}  // namespace specdec
