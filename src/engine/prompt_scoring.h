// Log-probabilities of a prompt's own tokens under a model: for each token after the first, how
// likely the model found it given the tokens before it. What the completions API returns for
// `echo` with `logprobs` (the loglikelihood requests of evaluation harnesses such as
// lm-evaluation-harness) and what perplexity is computed from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/logprobs.h"
#include "speculative/causal_lm.h"

namespace specdec {

// Reads prompt[0..n-1) into lm from an empty cache (lm is truncated to 0 first: a cached row
// holds K/V but no logits), chunk rows per forward pass, and returns n - 1 - first entries:
// entry i is prompt[first + i + 1]'s log-probability at row first + i (softmax at temperature
// 1, no filters, as token_logprob) with its top_n alternatives. Rows before `first` are read
// without logits (perplexity scores only the second half of each window). The last prompt
// token is left unread, as the decoder expects (its row comes with the first generated token).
// lm must score its whole vocabulary (no logit subset). Throws for an empty prompt, a bad
// top_n, chunk or first, or a token outside the vocabulary.
std::vector<TokenLogprob> score_prompt(CausalLM& lm, std::span<const int32_t> prompt, int32_t top_n,
                                       int32_t chunk, int32_t first = 0);

}  // namespace specdec
