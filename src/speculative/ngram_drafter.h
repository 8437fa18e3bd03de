// Prompt-lookup ("n-gram") drafting, as in llama.cpp's lookup decoding and vLLM's ngram
// speculator: no draft model at all. The last n committed tokens are looked up among the earlier
// committed text (prompt + generated); if they occurred before, the tokens that followed that
// occurrence are proposed. Summaries, extraction, code edits and chat that quotes the prompt copy
// long spans of earlier text, and then such drafts are accepted at nearly no cost.
//
// Proposals are deterministic given the committed tokens, so q_i is one-hot on y_i. The
// unchanged rejection rule then reads: accept y_i with probability min(1, p_i(y_i)/1) = p_i(y_i);
// on rejection draw from norm(max(0, p_i - onehot(y_i))), i.e. p_i with y_i removed and
// renormalized. Emitted token law: p(y) * [x = y] + (1 - p(y)) * p(x)[x != y] / (1 - p(y)) = p(x),
// so the output is exactly the target's (greedy: accept iff y_i = argmax p_i).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculative/drafter.h"

namespace specdec {

struct NgramParams {
  int32_t n_max = 3;  // longest suffix tried first
  int32_t n_min = 1;  // shortest suffix still trusted
};

class NgramDrafter : public Drafter {
 public:
  // n_vocab: the target's vocabulary (the size of the one-hot q). Requires
  // 1 <= n_min <= n_max <= kMaxN.
  NgramDrafter(int32_t n_vocab, const NgramParams& params = {});

  static constexpr int32_t kMaxN = 32;

  const char* kind() const override { return "ngram"; }
  void start(std::span<const int32_t> prompt, int32_t n_cached) override;
  int32_t max_drafts(int32_t /*n*/) const override { return kMaxDrafts; }
  int32_t propose(std::span<const int32_t> committed, int32_t gamma, const SamplingParams& params,
                  Rng& rng, std::vector<int32_t>& drafts, std::vector<Distribution>& q) override;
  void finish_round(std::span<const int32_t> /*committed*/, int32_t /*n_before*/, int32_t /*m*/,
                    int32_t /*accepted*/) override {}

  // The lookup itself, without distributions: where the continuation starts in history (the
  // token after the most recent earlier occurrence of the longest matching suffix, n_max down to
  // n_min) and how long the matched suffix is; {-1, 0} when nothing matches. Indexes any
  // committed tokens not seen yet. history must extend the history of previous calls since
  // start() (committed tokens are never rewritten within a sequence).
  struct Match {
    int32_t pos = -1;
    int32_t n = 0;
  };
  Match lookup(std::span<const int32_t> history);

  const NgramParams& params() const { return params_; }

 private:
  static constexpr int32_t kMaxDrafts = 1 << 30;
  static uint64_t hash(std::span<const int32_t> gram);
  void index_up_to(std::span<const int32_t> history);

  int32_t n_vocab_;
  NgramParams params_;
  // index_[n - n_min]: hash of an n-gram -> the position right after its most recent occurrence
  // that is followed by a committed token (so a continuation exists). Overwriting on insert keeps
  // "most recent"; an occurrence ending at the end of the history is inserted only once the next
  // token is committed, so the current suffix never matches itself.
  std::vector<std::unordered_map<uint64_t, int32_t>> index_;
  int32_t indexed_ = 0;  // n-grams ending at positions 1..indexed_-1 have been inserted
};

}  // namespace specdec
