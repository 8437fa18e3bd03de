// The legacy completions API's best_of (OpenAI's, vLLM's): best_of sequences are generated per
// prompt and the n "best" come back, best meaning the highest mean log-probability per token
// under the model's own distribution (OpenAI's definition). Each sequence is a sample of the
// target's distribution however it was decoded, so choosing among them by the target's own
// log-probabilities is the same choice target-only decoding would make.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace specdec::server {

// A sequence's score: the mean of its tokens' log-probabilities (GenerationResult::logprobs,
// which the request must have asked for); -infinity for a sequence without any.
double mean_token_logprob(const GenerationResult& result);

// results hold per_prompt sequences per prompt (prompt p's are [p * per_prompt, (p + 1) *
// per_prompt)); returns the indices of the n best of each prompt's, prompt by prompt, best
// first (ties: the earlier sequence first).
std::vector<size_t> best_of_choices(std::span<const GenerationResult> results, size_t per_prompt,
                                    size_t n);

}  // namespace specdec::server
