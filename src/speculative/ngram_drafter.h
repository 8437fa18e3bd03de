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
//
// The adaptive policy below also decides how many tokens to propose (possibly none) from an
// acceptance estimate that learns from earlier rounds, including their rejected drafts. That
// keeps the proof intact: the proof holds conditionally on everything that happened before the
// round, and the round's proposals (which tokens, how many) are a function of that past alone,
// fixed before the verifier draws anything for this round. Only q must not peek at the round's
// own accept tests, and it does not.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculative/drafter.h"

namespace specdec {

// How many of the copied tokens a round proposes.
enum class NgramPolicy {
  // Copy up to γ tokens whenever the lookup matches (llama.cpp/vLLM prompt lookup).
  Fixed,
  // Propose the k-th copied token only while the estimated probability that drafts 1..k are all
  // accepted stays above the verify cost of one more token (see NgramDrafter::draft_length).
  Adaptive,
};
const char* ngram_policy_name(NgramPolicy policy);  // "fixed" / "adaptive"

struct NgramParams {
  int32_t n_max = 3;  // longest suffix tried first
  int32_t n_min = 1;  // shortest suffix still trusted
  NgramPolicy policy = NgramPolicy::Adaptive;
  // Adaptive: what one more drafted token adds to a verify pass, in target decode steps (a pass
  // over γ + 1 tokens costs about 1 + verify_cost * γ steps). 0.36 is the 2-core AVX2 dev VM
  // with SmolLM2-135M (docs/benchmarks.md); lower it when the batched verify gets cheaper. Too
  // low a value over-drafts, which costs far more than under-drafting does.
  float verify_cost = 0.36f;
  // Adaptive: step size of the online correction of the acceptance estimate (0: use the prior
  // table alone).
  float adapt_rate = 0.1f;
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
  // Feeds the round's outcome to the adaptive acceptance estimate.
  void finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                    int32_t accepted) override;
  // Nothing to undo (the index holds committed text only), and no outcome to learn from.
  void discard_round(std::span<const int32_t> /*committed*/, int32_t /*n_before*/,
                     int32_t /*m*/) override {}

  // The lookup itself, without distributions: where the continuation starts in history (the
  // token after the most recent earlier occurrence of the longest matching suffix, n_max down to
  // n_min) and how long the matched suffix is; {-1, 0, 0} when nothing matches. len extends the
  // match backwards past n (up to kMaxMatch): how much earlier text the occurrence really shares
  // with the suffix, the adaptive policy's evidence. Indexes any committed tokens not seen yet.
  // history must extend the history of previous calls since start() (committed tokens are never
  // rewritten within a sequence).
  struct Match {
    int32_t pos = -1;
    int32_t n = 0;
    int32_t len = 0;  // n <= len <= max(n, kMaxMatch)
  };
  Match lookup(std::span<const int32_t> history);
  static constexpr int32_t kMaxMatch = 32;

  // Adaptive policy: how many of `available` copied tokens to propose after a match of length
  // match_len, i.e. the largest k with P(drafts 1..k all accepted) >= threshold(), where draft i
  // is judged with a match of length match_len + i - 1 (once it is accepted, the copy shares one
  // more token with the earlier text). 0 means no proposal: a plain target step.
  int32_t draft_length(int32_t match_len, int32_t available) const;
  // The estimated probability that a copied token is accepted (given the earlier drafts of the
  // round were) when the earlier text matches the last match_len tokens: the prior table,
  // corrected online by a shared log-odds offset.
  double acceptance_estimate(int32_t match_len) const;
  // Learns from a round that proposed m drafts after a match of length match_len of which
  // `accepted` were accepted: drafts 1..min(accepted + 1, m) were tested.
  void observe(int32_t match_len, int32_t m, int32_t accepted);
  // A draft k is worth verifying when its chance of being reached and accepted exceeds what it
  // adds to the pass, verify_cost steps, valued at the tokens per step the run makes anyway.
  double threshold() const { return params_.verify_cost * kExpectedThroughput; }
  double adapt_offset() const { return offset_; }

  const NgramParams& params() const { return params_; }

 private:
  static constexpr int32_t kMaxDrafts = 1 << 30;
  // Tokens per decode step that speculation reaches anyway (1.0-1.3 measured): maximizing
  // tokens per unit of cost means a draft must add more than (that ratio) x (its cost).
  static constexpr double kExpectedThroughput = 1.2;
  static uint64_t hash(std::span<const int32_t> gram);
  void index_up_to(std::span<const int32_t> history);

  double offset_ = 0;           // adaptive: learned log-odds correction of the prior table
  int32_t last_match_len_ = 0;  // the match behind the current round's drafts

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
