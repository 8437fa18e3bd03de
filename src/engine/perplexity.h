// Perplexity of a model over a text, computed as llama.cpp's llama-perplexity computes it, so that
// the two tools' numbers compare on the same GGUF (the usual check of a quantization): the text's
// tokens are cut into windows of n_ctx tokens, each read from an empty cache (the first token
// replaced by BOS when the vocabulary adds one), and only the second half of each window is
// scored, so that every scored token has at least n_ctx / 2 tokens of context.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "speculative/causal_lm.h"

namespace specdec {

struct PerplexityOptions {
  int32_t n_ctx = 512;     // window size; the model's cache must hold it
  int32_t max_chunks = 0;  // windows to score (0: all that fit in the text)
  int32_t bos = -1;        // >= 0: each window's first token becomes this (add_bos vocabularies)
  int32_t batch = 64;      // rows per forward pass while scoring
};

struct PerplexityResult {
  int32_t chunks = 0;
  int64_t scored = 0;    // tokens scored: chunks x (n_ctx - 1 - n_ctx / 2)
  double mean_nll = 0;   // mean negative log-likelihood per scored token (nats)
  double ppl = 0;        // exp(mean_nll)
  double ppl_error = 0;  // standard error of ppl (llama.cpp's "+/-"), 0 with one token
};

// Called after each window with its index (from 0) and the perplexity over the windows so far.
using PerplexityProgress = std::function<void(int32_t chunk, double running_ppl)>;

// The windows a text of n_tokens gives (at most max_chunks); throws specdec::Error when it holds
// not one, or max_chunks < 0.
int32_t perplexity_windows(size_t n_tokens, const PerplexityOptions& options);

// Throws specdec::Error when the text holds fewer than n_ctx tokens, n_ctx < 4, or a token or
// option is out of range.
PerplexityResult perplexity(CausalLM& lm, std::span<const int32_t> tokens,
                            const PerplexityOptions& options,
                            const PerplexityProgress& progress = {});

}  // namespace specdec
