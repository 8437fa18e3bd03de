// Sampling filters and the filtered next-token distribution.
//
// One code path turns logits into the distribution that is actually sampled from. Speculative
// decoding calls it for the draft (q) and the target (p) with the same SamplingParams, so the
// accept/reject ratio compares like with like.
#pragma once

#include <cstdint>
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
  bool greedy() const { return temperature <= 0.0f; }
};

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

// softmax(logits / T) then top-k, top-p, min-p (llama.cpp's order: top-k, top-p, min-p), then
// renormalized. Greedy params give a one-hot distribution on the argmax.
void make_distribution(std::span<const float> logits, const SamplingParams& params,
                       Distribution& out);

// Sum over ids of min(a(id), b(id)): the acceptance probability of speculative sampling when
// the target's distribution is a and the draft's is b (1 - total variation distance).
double overlap(const Distribution& a, const Distribution& b);

// Draws one id from dist with one uniform from rng.
int32_t sample(const Distribution& dist, Rng& rng);

}  // namespace specdec
