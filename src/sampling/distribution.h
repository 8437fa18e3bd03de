// Sampling filters and the filtered next-token distribution.
//
// One code path turns logits into the distribution that is actually sampled from. Speculative
// decoding calls it for the draft (q) and the target (p) with the same SamplingParams, so the
// accept/reject ratio compares like with like.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sampling/rng.h"

namespace specdec {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0 means greedy (argmax, ties to the lowest id)
  int top_k = 40;            // <= 0 disables
  float top_p = 0.95f;       // >= 1 disables
  float min_p = 0.05f;       // <= 0 disables
  uint64_t seed = 0;
  // llama.cpp's further filters (off by default). Each is a function of one row's logits, so the
  // target's p stays a function of its logits and speculation stays exact with any of them.
  float typical_p = 1.0f;        // locally typical sampling; >= 1 disables, 0 keeps one token
  float top_n_sigma = -1.0f;     // keep logits within n standard deviations of the max; <= 0 off
  float xtc_probability = 0.0f;  // XTC: how often the top choices are excluded; 0 disables
  float xtc_threshold = 0.1f;    // XTC: the probability that makes a choice "top"; > 0.5 disables
  // Dynamic temperature (llama.cpp's temp-ext): the survivors of the filters are sampled at a
  // temperature between T - range and T + range, higher the flatter they are: T_min + (T_max -
  // T_min) * (H / log n)^exponent, H their entropy at temperature 1. range 0 disables.
  float dynatemp_range = 0.0f;
  float dynatemp_exponent = 1.0f;
  // Where the temperature applies. false (the default, as in vLLM and Hugging Face): first, so
  // every filter measures softmax(logits / T), the distribution that is sampled. true (llama.cpp's
  // sampler chain, where temperature is the last stage; text-generation-webui's and SillyTavern's
  // "temperature last"): top-k, typical, top-p, min-p and XTC measure softmax(logits), and their
  // survivors are then sampled in proportion to exp(logit / T). Both sides of a speculative round
  // get the same params, so either order is exact.
  bool temperature_last = false;
  // Mirostat (sampling/mirostat.h; llama.cpp's --mirostat): 1 or 2 replaces every filter above
  // with Mirostat's truncation at temperature T, which aims the text's surprise at tau bits per
  // token; 0 (the default) is off. mirostat_mu is the sequence's state, the surprise cap mu this
  // row is sampled at: NaN (the default) means the start of a sequence, 2 tau. The decoder keeps
  // it per sequence and sets it for each row; mirostat_eta is how fast it follows.
  int mirostat = 0;
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
  float mirostat_mu = std::numeric_limits<float>::quiet_NaN();
  bool greedy() const { return temperature <= 0.0f; }
  bool xtc_active() const { return xtc_probability > 0.0f && xtc_threshold <= 0.5f; }
  bool mirostat_active() const { return mirostat != 0 && !greedy(); }
};

// Throws specdec::Error naming the parameter when a filter's value is outside its range
// (typical_p >= 0, top_n_sigma finite, xtc_probability in [0, 1], xtc_threshold in [0, 1],
// dynatemp_range and dynatemp_exponent finite and >= 0, mirostat 0, 1 or 2 with tau and eta finite
// and >= 0).
void check_sampling_params(const SamplingParams& params);

// A normalized distribution over a subset of the vocabulary: ids[i] has probability probs[i].
// Entries are sorted by descending probability (ties: ascending id); probs sum to 1.
struct Distribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
  int32_t n_vocab = 0;

  size_t size() const { return ids.size(); }
  float prob(int32_t id) const;  // 0 for ids outside the support
  int32_t argmax() const { return ids.empty() ? -1 : ids.front(); }
};

// softmax(logits / T), then the filters in llama.cpp's order: top-n-sigma, top-k, typical, top-p,
// min-p, XTC; renormalized. (llama.cpp applies its temperature after the filters; here it comes
// first by default, as in vLLM and Hugging Face, so top-p and min-p measure the distribution that
// is sampled; params.temperature_last selects llama.cpp's order.)
// A dynamic temperature re-weights the survivors of min-p (before XTC, which here is a mixture
// over the final entries; llama.cpp measures its entropy after XTC's exclusion).
// XTC, which llama.cpp applies at random (with probability xtc_probability the choices at or above
// xtc_threshold but the least likely of them are removed), is here the mixture of the two outcomes
// with those weights: the same distribution for the token, drawn with one uniform, so a speculative
// verify pass can compare it against the draft's. Greedy params give a one-hot distribution on the
// argmax; no filter changes that. With params.mirostat on (and T > 0), Mirostat's truncation at
// params.mirostat_mu replaces the filters (make_mirostat_distribution).
void make_distribution(std::span<const float> logits, const SamplingParams& params,
                       Distribution& out);

// Sum over ids of min(a(id), b(id)): the acceptance probability of speculative sampling when
// the target's distribution is a and the draft's is b (1 - total variation distance).
double overlap(const Distribution& a, const Distribution& b);

// Draws one id from dist with one uniform from rng.
int32_t sample(const Distribution& dist, Rng& rng);

}  // namespace specdec
