// The generation loop: speculative rounds over a target CausalLM and a Drafter (a draft model, or
// prompt lookup), plus plain target-only decoding through the same distribution code.
//
// Protocol (the invariant between calls). Let t[0..n) be the committed tokens (prompt followed by
// generated tokens; n >= 1). Then
//   * the target's cache holds exactly t[0..n-1): every committed token but the last;
//   * with a draft model (ModelDrafter), the draft's cache holds t[0..d) for some d <= n-1 (the
//     drafter tracks d): usually d = n-1, d = n-2 after a round that accepted every draft (the
//     draft never ran the last draft token), and it lags further after target-only steps;
//   * the last committed token t[n-1] is pending: it is the first input of the next step.
// A round with up to γ drafts:
//   1. draft: the drafter proposes m <= γ tokens y_1..y_m with distributions q_1..q_m. A draft
//      model feeds t[d..n) in one call (catch-up, ending with t[n-1]); its last row gives q_1 and
//      y_1 ~ q_1; then it feeds y_i alone to get q_{i+1}, for i < m (m = γ always). Draft cache:
//      t[0..n) y_1..y_{m-1}. Prompt lookup proposes a copy of earlier text with one-hot q_i (and
//      may propose m < γ, or m = 0: then the step is target-only, step_baseline()).
//   2. verify: one target call on [t[n-1], y_1..y_m] gives p_1..p_{m+1} (row j conditions on
//      t[0..n) y_1..y_j). Target cache: t[0..n) y_1..y_m.
//   3. verify_drafts -> a accepted and a next token z; commit y_1..y_a z (cut short by the token
//      budget or the stop predicate, in which case later tokens are not committed).
//   4. roll back: target to n'-1 entries (n' = new committed length); a draft model to the
//      committed part of what it holds, min(n + min(a, m-1), n'-1). Rows of rejected tokens are
//      never used again: the next round recomputes everything past the committed prefix.
// γ shrinks to fit the token budget (γ <= remaining - 1: the round emits up to γ + 1 tokens) and
// the contexts (target: n + γ <= capacity; draft model: n + γ - 1 <= capacity); at γ = 0 the
// round is a target-only step. Generation ends when the budget is spent, the stop predicate fires
// (the stop token itself is committed; nothing after it is), or the target cannot take the
// pending token.
//
// Randomness: one stream (rng) serves, in order, the drafter's own draws (a sampling draft model)
// and the accept tests, corrections and bonuses, so a run is reproducible from its seed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/logprobs.h"
#include "sampling/rng.h"
#include "sampling/token_constraint.h"
#include "speculative/causal_lm.h"
#include "speculative/decode_stats.h"
#include "speculative/drafter.h"
#include "speculative/rejection_rules.h"
#include "speculative/token_origin.h"

namespace specdec {

class ThreadPool;

enum class StopReason { None, MaxTokens, StopToken, ContextFull };

class SpeculativeDecoder {
 public:
  using StopPredicate = std::function<bool(int32_t token)>;

  // draft may be null (target-only decoding); otherwise the decoder drafts with a ModelDrafter
  // over it. gamma >= 0. The models, and rng, must outlive the decoder; rng is the run's single
  // random stream (draft sampling, accept tests, corrections).
  SpeculativeDecoder(CausalLM& target, CausalLM* draft, const SamplingParams& params, int32_t gamma,
                     Rng& rng);
  // Any drafter (e.g. NgramDrafter); it must outlive the decoder.
  SpeculativeDecoder(CausalLM& target, Drafter& drafter, const SamplingParams& params,
                     int32_t gamma, Rng& rng);

  // Establishes the protocol's invariant for a non-empty prompt. prompt[0..n_cached) must already
  // be in the target's cache (the engine's prompt cache; 0 clears it), and a draft model's cache
  // must hold a prefix of the prompt, of any length. The target is prefilled with
  // prompt[n_cached..n-1) now, and so is a draft model, from where its cache ends, unless it
  // reads lazily (ModelDrafter::start). Resets stats.
  void start(std::span<const int32_t> prompt, int32_t max_new_tokens, StopPredicate stop = {},
             int32_t n_cached = 0);

  // One speculative round (a target-only step when no draft fits); returns the tokens committed.
  int32_t step();
  // One target-only token; returns the tokens committed (0 or 1).
  int32_t step_baseline();
  // step() until done().
  void run();

  bool done() const { return reason_ != StopReason::None; }
  StopReason stop_reason() const { return reason_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // prompt + generated
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(tokens_).subspan(prompt_len_);
  }
  // origins()[i]: where generated()[i] came from (same length as generated()).
  std::span<const TokenOrigin> origins() const { return origins_; }
  // d in the protocol above (0 without a draft model).
  int32_t draft_committed() const { return model_view_ ? model_view_->committed() : 0; }
  const Drafter* drafter() const { return drafter_; }  // null: target-only
  const DecodeStats& stats() const { return stats_; }

  // Builds a verify pass's target distributions (T > 0) on this pool, one position per task,
  // instead of one after another on the calling thread; null (the default) keeps them on the
  // caller. Each distribution is computed exactly as on one thread, so the output does not change.
  // The pool must outlive the decoder. When several decoders share a pool from different
  // threads (batched serving), give them the same `guard`: a decoder then uses the pool only
  // when it gets the guard without waiting, and builds on its own thread otherwise.
  void set_thread_pool(ThreadPool* pool, std::mutex* guard = nullptr) {
    pool_ = pool;
    pool_guard_ = guard;
  }

  // Record, for every generated token, its log-probability under the target's own distribution
  // (sampling/logprobs.h) and the top_n most likely alternatives, from the logits the verify
  // pass computed anyway; -1 (the default) records nothing. With post_sampling, the entries are
  // taken from the distribution each token was sampled from instead (filters, penalties and
  // constraint applied: llama-server's post_sampling_probs; one-hot when greedy). Call before
  // start().
  void set_logprobs(int32_t top_n, bool post_sampling = false);
  // Repetition, presence and frequency penalties and logit bias (sampling/penalties.h) on every
  // target distribution, counting the generated text and, on a verify row, the drafts before it;
  // the drafter gets them too. Inactive params (the default) adjust nothing. Logprobs stay the
  // raw model's. Throws specdec::Error, changing nothing, when params are out of range. Call
  // before start().
  void set_penalties(const PenaltyParams& params);
  // A rule on which tokens may come next (sampling/token_constraint.h: a grammar), applied to
  // every target distribution after the penalties, counting on a verify row the drafts before
  // it; the drafter gets it too, and a one-hot proposal is cut at its first forbidden token
  // (see step()). nullptr
  // (the default): none. The constraint must outlive the decoder's use of it; start() resets
  // it. A target row that the rule leaves no token ends the run with specdec::Error. Logprobs
  // stay the raw model's. Call before start().
  void set_constraint(TokenConstraint* constraint);
  // logprobs()[i] belongs to generated()[i] (empty unless set_logprobs was called).
  std::span<const TokenLogprob> logprobs() const { return logprobs_; }

  // A cap on each round's γ, asked before every round (e.g. from how many sequences share the
  // target's passes); returns >= 0. Any γ is lossless, but with sampling the random stream's use
  // depends on it, so a caller that wants seeded runs reproducible must not vary it.
  void set_gamma_limit(std::function<int32_t()> limit) { gamma_limit_ = std::move(limit); }
  // llama.cpp's --draft-min (speculative.n_min): a round whose γ (budget, context, cap) is below
  // n is a plain target step, and so is one whose drafter proposes fewer than n one-hot drafts
  // (prompt lookup, a greedy draft): they are dropped unverified (Drafter::discard_round), as
  // llama-server drops a small draft. Exact, since such a proposal and so the decision are
  // functions of the committed text. A shorter proposal of sampled drafts is verified: dropping
  // it would verify draws from q conditioned on the round's length, which depends on them (a
  // model drafter takes DraftLengthParams::min_drafts instead, which forces the length). n is
  // clamped to γ, as llama-server clamps n_min to n_max; 0 (the default): nothing dropped.
  void set_min_drafts(int32_t n) { min_drafts_ = std::max(0, n); }

  // Tests only: run a deliberately broken accept/reject rule (see rejection_rules.h).
  void set_verifier(VerifyFn verify) { verify_ = verify; }

 private:
  // false once generation has ended; `row`: the row of logits_ that predicted the token.
  bool commit(int32_t token, TokenOrigin origin, size_t row);
  // p_[0..k) from the first k rows of logits_ (on pool_ when set and k > 1).
  void make_target_distributions(int32_t k);
  // Row j of logits_ as the distribution sees it: with penalties or a constraint, a copy
  // adjusted for the text it follows (the committed tokens and drafts_[0..j)).
  std::span<const float> target_row(int32_t j);
  int32_t effective_gamma() const;
  // params_ at the sequence's Mirostat state (sampling/mirostat.h).
  SamplingParams row_params() const {
    SamplingParams p = params_;
    p.mirostat_mu = mirostat_mu_;
    return p;
  }
  bool target_full();

  CausalLM& target_;
  std::unique_ptr<ModelDrafter> model_drafter_;  // owned when built from a CausalLM*
  Drafter* drafter_ = nullptr;
  const ModelDrafter* model_view_ = nullptr;  // drafter_ when it is a ModelDrafter
  SamplingParams params_;
  int32_t gamma_;
  Rng& rng_;
  VerifyFn verify_ = &verify_drafts;
  StopPredicate stop_;
  ThreadPool* pool_ = nullptr;
  std::mutex* pool_guard_ = nullptr;
  std::function<int32_t()> gamma_limit_;
  int32_t min_drafts_ = 0;

  std::vector<int32_t> tokens_;
  std::vector<TokenOrigin> origins_;  // one per generated token
  int32_t logprobs_top_ = -1;
  bool logprobs_post_sampling_ = false;
  std::vector<TokenLogprob> logprobs_;         // one per generated token when logprobs_top_ >= 0
  std::unique_ptr<TokenPenalties> penalties_;  // null: none (heap: the drafter points at it)
  TokenConstraint* constraint_ = nullptr;      // not owned; null: none
  int32_t live_drafts_ = 0;                    // this round's leading drafts the constraint allows
  std::vector<float> penalized_;               // target_row()'s adjusted copies
  std::vector<std::span<const float>> target_rows_;
  float mirostat_mu_ = 0;  // Mirostat's mu after the committed text (start(): 2 tau)
  size_t prompt_len_ = 0;
  int32_t max_new_ = 0, generated_ = 0;
  StopReason reason_ = StopReason::MaxTokens;  // nothing to do before start()

  // Per-round buffers, reused.
  std::vector<float> logits_;
  std::vector<int32_t> drafts_, inputs_;  // drafts_ may be longer than this round's m
  std::vector<Distribution> q_, p_;
  DecodeStats stats_;
};

const char* stop_reason_name(StopReason reason);

}  // namespace specdec
