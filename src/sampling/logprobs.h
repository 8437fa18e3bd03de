// Log-probabilities of tokens under a model's own distribution, softmax(logits) at temperature
// 1 with no filters: what the OpenAI API's `logprobs` report (and vLLM's default), independent of
// the request's sampling settings, so that a greedy request still gets informative numbers.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sampling/distribution.h"

namespace specdec {

inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the top_n most likely tokens, most likely first
  // 1 + how many tokens are strictly more likely (vLLM's rank: 1 for the most likely).
  int32_t rank = 0;
};

// The entry of `token` at a position with these logits; top_n in [0, kMaxTopLogprobs]. Ties in
// the top list go to the smaller token id, so the list is deterministic.
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n);

// The same entry under the distribution a token was sampled from, after the sampling chain
// (llama-server's post_sampling_probs): log of the token's probability in `dist` and the first
// top_n entries of its support (fewer when the support is smaller; Distribution's order). The
// token must have probability > 0 in it.
TokenLogprob sampled_logprob(const Distribution& dist, int32_t token, int32_t top_n);

}  // namespace specdec
