#include "engine/perplexity.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "engine/prompt_scoring.h"

namespace specdec {

int32_t perplexity_windows(size_t n_tokens, const PerplexityOptions& o) {
  if (o.n_ctx < 4) fail("perplexity: the window must hold at least 4 tokens, got ", o.n_ctx);
  if (o.max_chunks < 0) fail("perplexity: chunks must be >= 0, got ", o.max_chunks);
  const auto available = static_cast<int64_t>(n_tokens / static_cast<size_t>(o.n_ctx));
  if (available == 0) {
    fail("perplexity: the text has ", n_tokens, " tokens, fewer than one window of ", o.n_ctx,
         " (lower -c or give a longer text)");
  }
  const int64_t cap = o.max_chunks > 0 ? o.max_chunks : INT32_MAX;
  return static_cast<int32_t>(std::min(available, cap));
}

PerplexityResult perplexity(CausalLM& lm, std::span<const int32_t> tokens,
                            const PerplexityOptions& o, const PerplexityProgress& progress) {
  // The window size itself is checked with the text's length (perplexity_windows, below).
  if (o.n_ctx > lm.capacity()) {
    fail("perplexity: a window of ", o.n_ctx, " tokens exceeds the context of ", lm.capacity());
  }
  if (o.batch < 1) fail("perplexity: batch must be >= 1, got ", o.batch);
  if (o.bos >= lm.n_vocab()) fail("perplexity: BOS id ", o.bos, " is outside the vocabulary");
  const int32_t chunks = perplexity_windows(tokens.size(), o);
  const int32_t first = o.n_ctx / 2;
  // Sums in double over all scored tokens, as llama-perplexity does for its estimate and its
  // standard error.
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<int32_t> window(static_cast<size_t>(o.n_ctx));
  for (int32_t c = 0; c < chunks; ++c) {
    const auto start = static_cast<size_t>(c) * static_cast<size_t>(o.n_ctx);
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(start), o.n_ctx, window.begin());
    if (o.bos >= 0) window[0] = o.bos;
    // The window's last token is only a target: score_prompt leaves it unread, as needed.
    for (const TokenLogprob& e : score_prompt(lm, window, 0, o.batch, first)) {
      const double lp = e.logprob;
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    if (progress) progress(c, std::exp(nll / static_cast<double>(count)));
  }
  PerplexityResult r;
  r.chunks = chunks;
  r.scored = count;
  r.mean_nll = nll / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  const double variance = nll2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  if (count > 1 && variance > 0) {
    r.ppl_error = std::sqrt(variance / static_cast<double>(count - 1)) * r.ppl;
  }
  return r;
}

}  // namespace specdec
