// The draft side of speculative decoding: whatever proposes the tokens y_1..y_m that the target
// verifies in one pass, together with the distributions q_1..q_m they were drawn from.
//
// The accept/reject rule (rejection_sampler.h) is exact for ANY proposal mechanism, as long as
// y_i really is a draw from q_i and q_i depends only on the committed context and y_1..y_{i-1}:
// the proof P(emit x) = min(p, q)(x) + max(0, p - q)(x) = p(x) never uses where q came from. So
// a draft language model (ModelDrafter) and a deterministic prompt-lookup proposer (NgramDrafter,
// whose q_i is one-hot on y_i) plug into the same loop and the same rule.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/penalties.h"
#include "sampling/rng.h"
#include "sampling/token_constraint.h"
#include "speculative/acceptance_calibration.h"
#include "speculative/causal_lm.h"

namespace specdec {

class Drafter {
 public:
  virtual ~Drafter() = default;

  // "model" or "ngram": how reports label the run.
  virtual const char* kind() const = 0;

  // A new sequence whose first n_cached prompt tokens are already in the caches the drafter may
  // keep (see SpeculativeDecoder::start). Throws specdec::Error, before changing anything, when
  // the drafter cannot honour n_cached.
  virtual void start(std::span<const int32_t> prompt, int32_t n_cached) = 0;

  // The most drafts this drafter can propose when n tokens are committed (e.g. a draft model's
  // context), before the decoder's own budget and target-context limits.
  virtual int32_t max_drafts(int32_t n) const = 0;

  // Proposes m <= gamma drafts (gamma >= 1) after the committed tokens t[0..n) into drafts[0..m)
  // and their distributions into q[0..m) (both resized to at least m); returns m. m = 0 means no
  // proposal: the decoder runs a plain target-only step. Sampling drafters draw from rng, the
  // run's single stream, so a run stays reproducible from its seed.
  virtual int32_t propose(std::span<const int32_t> committed, int32_t gamma,
                          const SamplingParams& params, Rng& rng, std::vector<int32_t>& drafts,
                          std::vector<Distribution>& q) = 0;

  // After a round that proposed m >= 1 drafts of which `accepted` were accepted: committed is the
  // new history t[0..n'), n_before the length it had when propose ran. Lets a stateful drafter
  // drop what it computed for rejected drafts.
  virtual void finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                            int32_t accepted) = 0;
  // Instead of finish_round: the m >= 1 drafts proposed after t[0..n_before) were dropped
  // unverified (SpeculativeDecoder::set_min_drafts), and the round was a plain target step.
  // The drafter returns to a committed prefix of the text and learns nothing from the round.
  virtual void discard_round(std::span<const int32_t> committed, int32_t n_before, int32_t m) = 0;

  // The request's penalties (sampling/penalties.h; nullptr: none), owned by the decoder, which
  // keeps their counts at the committed text. A drafter that builds q from logits applies them
  // too, counting the round's earlier drafts, so that q resembles the penalized p; one whose q
  // is one-hot (prompt lookup) need not. Exactness does not depend on it.
  virtual void set_penalties(const TokenPenalties* /*penalties*/) {}
  // The request's token constraint (sampling/token_constraint.h; nullptr: none), owned by the
  // caller and kept at the committed text by the decoder. A drafter that builds q from logits
  // applies it, counting the round's earlier drafts, so that every draft is an allowed token;
  // the decoder cuts a one-hot proposal (prompt lookup) at its first token the rule forbids.
  virtual void set_constraint(TokenConstraint* /*constraint*/) {}
};

// How many tokens a model draft proposes per round. Fixed: always gamma (the decoder's cap).
// Adaptive: the expected-gain rule. Before drawing y_i the drafter knows q_i, and its top
// probability a_i estimates how likely the target is to accept y_i; P = a_1 * ... * a_i is then
// the chance that drafts 1..i all pass, which is what the i-th draft is worth (one target step
// saved). The draft proposes y_i while P exceeds the verify cost of one more row, and runs the
// draft model for q_{i+1} only while P times the running acceptance rate pays for that draft
// step plus its verify row. The decision depends only on q_1..q_i, i.e. on the committed
// context and y_1..y_{i-1}, never on y_i itself or on the target, so y_i stays a plain draw from
// q_i and the rule stays exact (see the header comment).
// With `calibrate`, a_i is not the top probability itself but what drafts of that confidence
// were accepted at in the run's earlier rounds (AcceptanceCalibration): still a function of q_i
// and the past only.
struct DraftLengthParams {
  bool adaptive = false;
  bool calibrate = true;
  float draft_cost = 0.25f;   // one draft step, in target decode steps (bench column c)
  float verify_cost = 0.1f;   // one more verified row, in target decode steps
  float prior_accept = 0.7f;  // starting value of the running acceptance rate
  // llama.cpp's --draft-p-min: whatever the policy, a round stops before a draft whose
  // confidence (q's top probability; for a greedy draft the top probability of its softmax at
  // T = 1) is below p_min. 0: off. Decided from q_i before y_i is drawn, so exact like the rest.
  float p_min = 0.0f;
  // llama.cpp's --draft-min: neither p_min nor the adaptive rule ends a round before this many
  // drafts. (llama-server instead drops a shorter draft unverified; for sampled drafts that is
  // not exact: the drafts verified would then be draws from q conditioned on the round going
  // on, which depends on them, not draws from q. Forcing the length depends on nothing.) The
  // engine also hands it to SpeculativeDecoder::set_min_drafts, for the other proposals.
  int32_t min_drafts = 0;
  // When not empty: the cost of a target pass over 2, 3, ... tokens in decode steps (what
  // `specdec verify-cost` measures), which replaces verify_cost. The line need not be straight:
  // on the Qwen2.5-Coder 1.5B a 6th row costs several times a 5th (the K-quant kernels turn
  // compute bound). Even so, there the flat verify_cost measured faster (docs/benchmarks.md).
  std::vector<float> pass_costs;
};

// What the i-th draft's verify row (i from 0) costs under `p`, for i = 0..n-1: the rise of the
// lower convex hull of the pass-cost line (1 at k = 1, then p.pass_costs), continued at its last
// slope; the hull, because a dearer row followed by cheap ones is worth drafting through when
// the drafts are likely to pass. Without pass costs, verify_cost for every row.
std::vector<double> verify_row_costs(const DraftLengthParams& p, int32_t n);

// Drafts by sampling a smaller CausalLM autoregressively, with a lazy catch-up cache protocol
// (see the protocol comment in speculative_decoder.h): the draft's cache holds a committed prefix
// t[0..d) with d <= n-1, and each propose() first feeds it t[d..n) in one call.
class ModelDrafter : public Drafter {
 public:
  // draft must outlive the drafter.
  explicit ModelDrafter(CausalLM& draft, const DraftLengthParams& length = {})
      : draft_(draft), length_(length), accept_rate_(length.prior_accept) {}

  const char* kind() const override { return "model"; }
  void start(std::span<const int32_t> prompt, int32_t n_cached) override;
  int32_t max_drafts(int32_t n) const override;
  int32_t propose(std::span<const int32_t> committed, int32_t gamma, const SamplingParams& params,
                  Rng& rng, std::vector<int32_t>& drafts, std::vector<Distribution>& q) override;
  void finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                    int32_t accepted) override;
  void discard_round(std::span<const int32_t> committed, int32_t n_before, int32_t m) override;
  void set_penalties(const TokenPenalties* penalties) override { penalties_ = penalties; }
  void set_constraint(TokenConstraint* constraint) override { constraint_ = constraint; }

  // Lazy: start() leaves the prompt unread and the first propose() reads it (the catch-up every
  // proposal begins with), so a sequence that never drafts never pays for it; the draft's cache
  // and proposals are the same either way (batch invariance), only the timing moves.
  void set_lazy_start(bool lazy) { lazy_start_ = lazy; }
  // The most committed tokens a catch-up reads (0: no limit, the default). When the draft lags
  // by more, it drops its cache and reads only the last `window` tokens, at positions from 0:
  // its q then conditions on that suffix of the text alone. Any q is exact; on the Qwen pair a
  // 64-128-token window cost 0-2.5 points of acceptance (docs/benchmarks.md) and saves reading
  // the rest of a long prompt. The draft's cache is then not a prefix of the history, which the
  // caller must know (Engine: no sharing of those rows, and the cache is dropped afterwards).
  void set_context_window(int32_t window) { window_ = std::max(0, window); }
  // Whether the draft's cache starts later than the text (a windowed read happened).
  bool windowed() const { return base_ > 0; }
  // Where the draft's cache starts in the text: rows 0.. hold t[base()..committed()).
  int32_t base() const { return base_; }
  // Before start(): the draft's cache was left by an earlier run whose window re-based it at
  // `base`, so its rows hold that text from there. start() then keeps the rows the new prompt
  // still shares (a follow-up turn re-reads nothing) instead of taking them for a prefix from 0.
  void set_cache_base(int32_t base) { base_ = std::max(0, base); }
  // Committed tokens the draft has still to read before it can propose after t[0..n): with a
  // window, at most the window.
  int32_t lag(int32_t n) const {
    const int32_t behind = std::max(0, n - draft_len_);
    return window_ > 0 ? std::min(behind, window_) : behind;
  }

  CausalLM& model() { return draft_; }
  const CausalLM& model() const { return draft_; }
  int32_t committed() const { return draft_len_; }  // d in the protocol

 private:
  CausalLM& draft_;
  DraftLengthParams length_;
  double accept_rate_;  // running per-draft acceptance rate (adaptive length)
  AcceptanceCalibration calibration_;
  std::vector<double> confidence_;  // of this round's drafts (adaptive length)
  std::vector<double> row_cost_;    // verify_row_costs(length_, ...), grown on demand
  double row_cost(int32_t i);
  // Reads t[draft_len_..end) (re-based on the window when it lags by more), the last row's
  // logits into `logits` when given.
  void read(std::span<const int32_t> text, int32_t end, std::vector<float>* logits);
  int32_t draft_len_ = 0;  // d: the draft holds t[base_..d)
  int32_t base_ = 0;       // where its cache starts in the text (0 unless a window re-based it)
  int32_t window_ = 0;
  bool lazy_start_ = false;
  std::vector<float> logits_;
  std::vector<double> exp_scratch_;  // the greedy confidence's softmax terms
  const TokenPenalties* penalties_ = nullptr;
  TokenConstraint* constraint_ = nullptr;
  std::vector<float> penalized_;  // a logit row with the penalties (and constraint) applied
};

}  // namespace specdec
