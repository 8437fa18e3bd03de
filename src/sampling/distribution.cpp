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
#include "sampling/mirostat.h"
#include "sampling/rank_order.h"
#include "tensor/vec_ops.h"

namespace specdec {

namespace {

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

void check_sampling_params(const SamplingParams& params) {
  const auto in = [](float v, float lo, float hi) { return v >= lo && v <= hi; };
  if (!(params.typical_p >= 0.0f) || std::isinf(params.typical_p)) {
    fail("typical_p must be a number >= 0 (1 or more: off), got ", params.typical_p);
  }
  if (!std::isfinite(params.top_n_sigma)) {
    fail("top_n_sigma must be a finite number (<= 0: off), got ", params.top_n_sigma);
  }
  if (!in(params.xtc_probability, 0.0f, 1.0f)) {
    fail("xtc_probability must be in [0, 1] (0: off), got ", params.xtc_probability);
  }
  if (!in(params.xtc_threshold, 0.0f, 1.0f)) {
    fail("xtc_threshold must be in [0, 1] (above 0.5: off), got ", params.xtc_threshold);
  }
  if (!(std::isfinite(params.dynatemp_range) && params.dynatemp_range >= 0.0f)) {
    fail("dynatemp_range must be a number >= 0 (0: off), got ", params.dynatemp_range);
  }
  if (!(std::isfinite(params.dynatemp_exponent) && params.dynatemp_exponent >= 0.0f)) {
    fail("dynatemp_exponent must be a number >= 0, got ", params.dynatemp_exponent);
  }
  if (params.mirostat < 0 || params.mirostat > 2) {
    fail("mirostat must be 0 (off), 1 or 2, got ", params.mirostat);
  }
  if (!(std::isfinite(params.mirostat_tau) && params.mirostat_tau >= 0.0f)) {
    fail("mirostat_tau must be a number >= 0, got ", params.mirostat_tau);
  }
  if (!(std::isfinite(params.mirostat_eta) && params.mirostat_eta >= 0.0f)) {
    fail("mirostat_eta must be a number >= 0, got ", params.mirostat_eta);
  }
}

namespace {

// top-n-sigma's cut-off: the maximum minus n population standard deviations of the finite
// logits (llama.cpp's rule; -inf logits, masked by a grammar or min_tokens, do not count).
// Scaling every logit by 1 / T scales both sides alike, so it is applied to the raw logits.
float sigma_floor(std::span<const float> logits, float max_logit, float n_sigma) {
  double sum = 0;
  int64_t count = 0;
  for (float l : logits) {
    if (std::isfinite(l)) {
      sum += l;
      ++count;
    }
  }
  const double mean = sum / static_cast<double>(count);
  double acc = 0;
  for (float l : logits) {
    if (std::isfinite(l)) acc += (l - mean) * (l - mean);
  }
  const double sd = std::sqrt(acc / static_cast<double>(count));
  return static_cast<float>(max_logit - static_cast<double>(n_sigma) * sd);
}

// Locally typical sampling (Meister et al.) over the candidates in ids, whose weights sum to
// mass: keeps the fewest candidates, in order of |-log p - H| (H the candidates' entropy; ties in
// rank order), whose probability exceeds typical_p. The order is found among the candidates whose
// score lies under a bound, raised until they hold more than the needed mass (with a margin far
// above rounding), so that the vocabulary is not sorted when no top-k came first.
template <typename Weight>
void keep_typical(std::vector<int32_t>& ids, const Weight& weight, double mass, double typical_p,
                  const RanksBefore& before, int32_t n_vocab) {
  const double log_mass = std::log(mass);
  double entropy = 0;
  for (int32_t id : ids) {
    const double p = weight(id) / mass;
    entropy -= p * (std::log(weight(id)) - log_mass);
  }
  thread_local std::vector<double> score;
  if (score.size() < static_cast<size_t>(n_vocab)) score.resize(static_cast<size_t>(n_vocab));
  for (int32_t id : ids) {
    score[static_cast<size_t>(id)] = std::abs(log_mass - std::log(weight(id)) - entropy);
  }
  const auto less = [&](int32_t a, int32_t b) {
    const double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
    return sa < sb || (sa == sb && before(a, b));
  };
  thread_local std::vector<int32_t> sel;
  for (double bound = 1.0;; bound *= 4) {
    sel.clear();
    double held = 0;
    for (int32_t id : ids) {
      if (score[static_cast<size_t>(id)] <= bound) {
        sel.push_back(id);
        held += weight(id);
      }
    }
    if (sel.size() == ids.size() || held > typical_p * mass * (1 + 1e-9)) break;
  }
  std::sort(sel.begin(), sel.end(), less);
  size_t cut = sel.size();
  double cum = 0;
  for (size_t i = 0; i < sel.size(); ++i) {
    cum += weight(sel[i]) / mass;
    if (cum > typical_p) {
      cut = i + 1;
      break;
    }
  }
  ids.assign(sel.begin(), sel.begin() + static_cast<ptrdiff_t>(cut));
}

// Dynamic temperature over the survivors (ids, in rank order): their entropy at temperature 1,
// relative to the most it could be, picks the temperature; their weights are recomputed at it. At a
// temperature of 0 only the first (the largest logit) stays, as llama.cpp's temperature 0 does.
void apply_dynatemp(std::vector<int32_t>& ids, std::span<const float> logits, double* weights,
                    const SamplingParams& params) {
  const double top = logits[static_cast<size_t>(ids.front())];
  const auto at = [&](int32_t id) { return static_cast<double>(logits[static_cast<size_t>(id)]); };
  double z = 0;
  for (int32_t id : ids) z += std::exp(at(id) - top);
  double entropy = 0;
  for (int32_t id : ids) {
    const double p = std::exp(at(id) - top) / z;
    if (p > 0) entropy -= p * std::log(p);
  }
  const double t = params.temperature, range = params.dynatemp_range;
  const double t_min = std::max(0.0, t - range), t_max = t + range;
  const double normalized = entropy / std::log(static_cast<double>(ids.size()));
  const double t_dyn =
      t_min + (t_max - t_min) * std::pow(normalized, static_cast<double>(params.dynatemp_exponent));
  if (!(t_dyn > 0)) {
    ids.resize(1);
    return;
  }
  for (int32_t id : ids) weights[static_cast<size_t>(id)] = std::exp((at(id) - top) / t_dyn);
  // A temperature near 0 underflows the others' weights: they can no longer be sampled.
  std::erase_if(ids, [weights](int32_t id) { return !(weights[static_cast<size_t>(id)] > 0); });
}

// How many of out's first entries (in descending probability) are XTC's "top choices": at or
// above `threshold` in `probs`, the distribution XTC measures (out's own, or the one before a
// temperature applied last).
size_t xtc_top_count(std::span<const float> probs, double threshold) {
  size_t top = 0;
  while (top < probs.size() && probs[top] >= threshold) ++top;
  return top;
}

// XTC as a mixture: with probability `chance` the first `top` entries but the last of them are
// removed (when top is at least two). probs is sorted by descending probability; entries that end
// with no mass are dropped and the rest put back in Distribution's order.
void mix_xtc(Distribution& out, double chance, size_t top) {
  if (top < 2) return;
  const size_t last = top - 1;  // the least likely top choice stays
  double rest = 0;
  for (size_t i = last; i < out.probs.size(); ++i) rest += out.probs[i];
  const double kept_scale = (1 - chance) + chance / rest;
  thread_local std::vector<std::pair<float, int32_t>> entries;
  entries.clear();
  for (size_t i = 0; i < out.probs.size(); ++i) {
    const double p = out.probs[i] * (i < last ? 1 - chance : kept_scale);
    if (p > 0) entries.emplace_back(static_cast<float>(p), out.ids[i]);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  out.ids.resize(entries.size());
  out.probs.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out.probs[i] = entries[i].first;
    out.ids[i] = entries[i].second;
  }
}

// The survivors' probabilities, weights normalized, in ids' order.
void normalize_weights(const std::vector<int32_t>& ids, const double* weights,
                       std::vector<float>& probs) {
  probs.resize(ids.size());
  double total = 0;
  for (int32_t id : ids) total += weights[static_cast<size_t>(id)];
  const double inv_total = 1.0 / total;
  for (size_t i = 0; i < ids.size(); ++i) {
    probs[i] = static_cast<float>(weights[static_cast<size_t>(ids[i])] * inv_total);
  }
}

// A temperature applied last: the survivors (ids, in rank order) re-weighted to exp(logit / T)
// relative to the first. Weights that underflow drop out, as at any temperature.
void apply_temperature_last(std::vector<int32_t>& ids, std::span<const float> logits,
                            double* weights, double temperature) {
  const double top = logits[static_cast<size_t>(ids.front())], inv_t = 1.0 / temperature;
  for (int32_t id : ids) {
    weights[static_cast<size_t>(id)] =
        std::exp((static_cast<double>(logits[static_cast<size_t>(id)]) - top) * inv_t);
  }
  std::erase_if(ids, [weights](int32_t id) { return !(weights[static_cast<size_t>(id)] > 0); });
}

}  // namespace

namespace {

// make_distribution's filters, plus a floor on the probability in softmax(logits / T) below
// which tokens are dropped (Mirostat 2's cut; 0: none; only without top-k).
void build_distribution(std::span<const float> logits, const SamplingParams& params,
                        double prob_floor, Distribution& out) {
  const auto n = static_cast<int32_t>(logits.size());
  out.n_vocab = n;
  if (params.greedy()) {
    make_one_hot(logits, out);
    return;
  }
  if (prob_floor > 0 && params.top_k > 0 && params.top_k < n) {
    fail("make_distribution: a probability floor with top-k");
  }

  const float max_logit = max_f32(logits.data(), n);
  if (std::isnan(max_logit)) fail("make_distribution: NaN logit");
  if (std::isinf(max_logit)) fail("make_distribution: logits have no finite maximum");

  // Unnormalized probabilities relative to the maximum: w = exp((l - max) / T) in (0, 1], computed
  // in double so that neither a tiny T nor a wide logit range loses the ordering of the mass.
  // Each is computed once and kept (a row per thread, reused: no allocation once warm).
  // With the temperature last the filters measure the weights at temperature 1.
  const double m = max_logit, inv_t = params.temperature_last
                                          ? 1.0
                                          : 1.0 / static_cast<double>(params.temperature);
  thread_local std::vector<double> weights;
  if (weights.size() < static_cast<size_t>(n)) weights.resize(static_cast<size_t>(n));
  const auto weight = [&](int32_t id) { return weights[static_cast<size_t>(id)]; };
  // top-n-sigma drops a logit below its floor before anything else sees it: its weight is 0, so
  // it counts for no mass and every later filter drops it (w > 0 below).
  const bool sigma = params.top_n_sigma > 0.0f;
  const float floor = sigma ? sigma_floor(logits, max_logit, params.top_n_sigma) : 0.0f;
  const auto compute = [&](int32_t id) {
    const float l = logits[static_cast<size_t>(id)];
    const double w = sigma && l < floor ? 0.0 : std::exp((static_cast<double>(l) - m) * inv_t);
    weights[static_cast<size_t>(id)] = w;
    return w;
  };
  // min-p: p_i >= min_p * p_max  <=>  w_i >= min_p * w_max, and w_max is 1 unless typical
  // sampling removed the maximum. Weights that underflow to 0 can never be sampled, so they are
  // dropped with the same test. min_p > 1 is clamped so the maximum always survives.
  const double min_p = std::min(1.0, std::max(0.0, static_cast<double>(params.min_p)));
  double w_min = min_p;
  const auto keep = [&w_min](double w) { return w > 0 && w >= w_min; };
  const bool typical = params.typical_p < 1.0f;

  std::vector<int32_t>& ids = out.ids;
  double mass = 0;  // total weight after top-k: what top-p's threshold is relative to
  if (params.top_k > 0 && params.top_k < n) {
    select_top_k(logits, params.top_k, ids);
    size_t kept = 0;
    for (int32_t id : ids) {
      const double w = compute(id);
      mass += w;
      if (typical ? w > 0 : keep(w)) ids[kept++] = id;
    }
    ids.resize(kept);
  } else {
    // The same exps, several at a time (bit for bit std::exp's).
    exp_shifted_scaled_f64(logits.data(), n, m, inv_t, weights.data());
    if (sigma) {
      for (int32_t i = 0; i < n; ++i) {
        if (logits[static_cast<size_t>(i)] < floor) weights[static_cast<size_t>(i)] = 0;
      }
    }
    // Top-p over the whole vocabulary: its prefix lies among the largest weights (w is monotone
    // in the logit, so every w >= tau ranks before every w < tau). If the candidates with
    // w >= tau already hold the target mass, with a margin far above the rounding of summing
    // them in another order, the prefix found among them is the one the whole list gives, after
    // the same additions in the same order; the cut-off tau is lowered until that holds. Sorting
    // a few hundred candidates instead of the vocabulary is most of a T > 0 token's sampling.
    // The first scan also sums the mass, in index order: that sum is a chain of dependent adds,
    // and the comparisons and appends run alongside it instead of in a pass of their own.
    // Typical sampling needs every candidate, so it starts from all of them (tau 0, no min-p).
    // A probability floor needs the mass before the first scan: p_i >= floor <=> w_i >= floor *
    // mass (capped at the maximum's weight, 1, which always survives).
    bool mass_known = false;
    if (prob_floor > 0) {
      for (int32_t i = 0; i < n; ++i) mass += weights[static_cast<size_t>(i)];
      w_min = std::min(1.0, std::max(w_min, prob_floor * mass));
      mass_known = true;
    }
    double tau = params.top_p < 1.0f && !typical ? 1e-3 : 0.0;
    for (bool first = !mass_known;; first = false) {
      ids.clear();
      double held = 0;
      for (int32_t i = 0; i < n; ++i) {
        const double w = weights[static_cast<size_t>(i)];
        if (first) mass += w;
        if ((typical ? w > 0 : keep(w)) && w >= tau) {
          ids.push_back(i);
          held += w;
        }
      }
      if (tau == 0.0 || held >= static_cast<double>(params.top_p) * mass * (1 + 1e-9)) break;
      tau = tau > 1e-9 ? tau * 1e-3 : 0.0;
    }
  }

  const RanksBefore before{logits.data()};
  if (typical && ids.size() > 1) {
    // Top-p and min-p then measure the typical set: its mass, its most likely entry.
    keep_typical(ids, weight, mass, static_cast<double>(params.typical_p), before, n);
    mass = 0;
    double w_max = 0;
    for (int32_t id : ids) {
      mass += weight(id);
      w_max = std::max(w_max, weight(id));
    }
    w_min = min_p * w_max;
    std::erase_if(ids, [&](int32_t id) { return !keep(weight(id)); });
  }

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
  // A temperature stage re-weights the survivors: the dynamic temperature (measured at
  // temperature 1 in either order), or a temperature applied last. XTC comes before that stage
  // in llama.cpp's chain, so with the temperature last its top choices are the ones at
  // temperature 1; applied first, XTC measures the final weights.
  const bool dynamic = params.dynatemp_range > 0.0f && cut > 1;
  const bool temper_last = params.temperature_last && params.temperature != 1.0f && cut > 1;
  constexpr size_t kUnmeasured = std::numeric_limits<size_t>::max();
  size_t xtc_top = kUnmeasured;
  if (params.xtc_active() && params.temperature_last && (dynamic || temper_last)) {
    normalize_weights(ids, weights.data(), out.probs);
    xtc_top = xtc_top_count(out.probs, static_cast<double>(params.xtc_threshold));
  }
  if (dynamic) {
    apply_dynatemp(ids, logits, weights.data(), params);
  } else if (temper_last) {
    apply_temperature_last(ids, logits, weights.data(), static_cast<double>(params.temperature));
  }
  normalize_weights(ids, weights.data(), out.probs);
  if (params.xtc_active() && ids.size() > 1) {
    if (xtc_top == kUnmeasured) {
      xtc_top = xtc_top_count(out.probs, static_cast<double>(params.xtc_threshold));
    }
    // Survivors that underflowed at the temperature are the least likely, after the top choices.
    mix_xtc(out, static_cast<double>(params.xtc_probability), std::min(xtc_top, ids.size()));
  }
}

}  // namespace

void make_distribution(std::span<const float> logits, const SamplingParams& params,
                       Distribution& out) {
  if (logits.empty()) fail("make_distribution: empty logits");
  if (params.mirostat_active()) {
    const MirostatCut cut = mirostat_cut(logits, params);
    build_distribution(logits, cut.filters, cut.prob_floor, out);
    return;
  }
  build_distribution(logits, params, 0.0, out);
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
