// The KV-cache ablation of `specdec bench`: greedy decoding of the same tokens with the cache
// (the prompt once, then one token per forward pass) and without it (every step truncates the
// cache to 0 and recomputes the whole sequence so far, as a model without a cache must). Both go
// through the same Model::forward, so the ratio is what the cache buys, nothing else.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec {

class Model;
class ThreadPool;

struct GreedyTiming {
  std::vector<int32_t> tokens;  // the n generated tokens
  double total_ms = 0;          // from the prompt to the n-th token, prefill included
};

// Generates n >= 1 tokens greedily after prompt (non-empty). Throws specdec::Error if
// prompt + n does not fit the model's forward limits.
GreedyTiming greedy_with_cache(Model& model, std::span<const int32_t> prompt, int32_t n,
                               ThreadPool& pool);
GreedyTiming greedy_without_cache(Model& model, std::span<const int32_t> prompt, int32_t n,
                                  ThreadPool& pool);

}  // namespace specdec
