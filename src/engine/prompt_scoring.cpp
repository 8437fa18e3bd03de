#include "engine/prompt_scoring.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

std::vector<TokenLogprob> score_prompt(CausalLM& lm, std::span<const int32_t> prompt, int32_t top_n,
                                       int32_t chunk, int32_t first) {
  if (prompt.empty()) fail("score_prompt: empty prompt");
  if (top_n < 0 || top_n > kMaxTopLogprobs) {
    fail("score_prompt: top_n must be in [0, ", kMaxTopLogprobs, "], got ", top_n);
  }
  if (chunk < 1) fail("score_prompt: chunk must be at least 1, got ", chunk);
  if (!lm.logit_ids().empty()) fail("score_prompt: the model scores only part of its vocabulary");
  const int32_t v = lm.n_vocab();
  for (int32_t id : prompt) {
    if (id < 0 || id >= v) fail("score_prompt: token id ", id, " is outside the vocabulary");
  }
  const auto n = static_cast<int32_t>(prompt.size());
  if (first < 0 || first > n - 1) {
    fail("score_prompt: first scored row ", first, " outside a prompt of ", n, " tokens");
  }
  lm.truncate(0);
  if (first > 0) lm.forward_last(prompt.first(static_cast<size_t>(first)), nullptr);
  std::vector<TokenLogprob> out;
  out.reserve(static_cast<size_t>(n - 1 - first));
  // A chunk's logits are chunk x n_vocab floats (600 KiB a row on a 152k vocabulary), so long
  // prompts go through in bounded pieces; batch invariance makes the pieces' size irrelevant.
  std::vector<float> logits;
  for (int32_t begin = first; begin < n - 1; begin += chunk) {
    const int32_t end = std::min(n - 1, begin + chunk);
    lm.forward(prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)),
               logits);
    for (int32_t i = begin; i < end; ++i) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(i - begin) * v,
                                       static_cast<size_t>(v));
      out.push_back(token_logprob(row, prompt[static_cast<size_t>(i) + 1], top_n));
    }
  }
  return out;
}

}  // namespace specdec
