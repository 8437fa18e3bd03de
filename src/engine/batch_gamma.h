// How a request that shares its target passes with other slots' requests sizes its rounds.
//
// A target pass over k rows costs about one weight read plus k rows of integer work; on a
// 2-core CPU the rows turn compute bound at once (verify-cost on the Qwen2.5-Coder 1.5B: each
// row past the first adds 0.12 to 0.2 of a decode step), so with several slots drafting, their
// verify rows add up and speculation stops paying. These rules only change γ and when the draft
// reads, never what a greedy request emits, and apply only where the caller lets γ follow the
// batch (engine.h).
#pragma once

#include <cstdint>
#include <limits>

namespace specdec {

inline constexpr int32_t kNoGammaCap = std::numeric_limits<int32_t>::max();

struct BatchCost {
  double row_cost = 0.15;    // one more row in a target pass, in decode steps alone
  double draft_cost = 0.25;  // one draft step alone, in target decode steps
};

// What a slot gains per unit of time from γ drafts per round over plain batched steps, when
// `active` slots each draft γ with per-draft acceptance `acceptance` (independent drafts:
// E(γ) = (1 - a^(γ+1)) / (1 - a) tokens a round) and their rows share one target pass of
// 1 + (active (γ+1) - 1) row_cost steps plus γ batched draft steps of draft_cost (1 + (active - 1)
// row_cost) each; plain steps give active tokens for 1 + (active - 1) row_cost. 1.0 at γ = 0.
double batch_gamma_gain(const BatchCost& cost, int32_t active, double acceptance, int32_t gamma);

// The γ (0..8) with the largest batch_gamma_gain: a cap on the request's own draft length. A
// slot alone is not capped (its own draft-length rule decides: real acceptance comes in runs,
// which the independent-draft model undervalues); active < 1 counts as alone. With row cost
// 0.15 and draft cost 0.26: acceptance 0.7 gives γ 1 from 2 to 4 slots and 0 at 8; 0.5 gives 0
// from 2 slots; 0.9 gives 3 at 2 slots, 2 at 4, 1 at 8.
int32_t batch_gamma_cap(const BatchCost& cost, int32_t active, double acceptance);

// Whether a draft model that has `lag` committed tokens still to read (a lazily started draft
// that has not drafted yet) should read them now, with `tokens_left` tokens left to generate
// and `active` slots sharing the passes. On the Qwen2.5-Coder pair the 0.5B draft reads a prompt
// token in about 2 ms (a third of the target's prefill per token), and speculation saved 8 to
// 15 ms per generated token for one client of `serve` (T 0.7 and 0; docs/benchmarks.md), less
// per slot as the batch grows. So the draft catches up only while lag * active <= 4 *
// tokens_left: a long prompt with a short answer in a full batch is not worth reading twice.
bool catch_up_pays(int32_t lag, int32_t tokens_left, int32_t active);

}  // namespace specdec
