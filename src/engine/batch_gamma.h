// How a request that shares its target passes with other slots' requests sizes its rounds.
//
// A target pass over k rows costs about one weight read plus k rows of integer work; on a
// 2-core CPU the first few rows ride on the read and then the rows turn compute bound
// (`verify-cost` on the Qwen2.5-Coder 1.5B with the 16-row AVX-512 kernels: 5 rows 1.17 decode
// steps, 9 rows 1.89, and 0.13-0.15 a row over 8-32 rows), so with several slots drafting, their
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
  // One prompt token read by the draft (its prefill), in target decode steps: on the
  // Qwen2.5-Coder pair about 2 ms against a 24-34 ms target step.
  double draft_read_cost = 0.07;
  // The first flat_rows rows of a pass cost flat_row_cost each past the first (the weights'
  // read bounds such a pass), the rows beyond them row_cost each (compute bounds them):
  // `verify-cost` on the Qwen2.5-Coder 1.5B, 2 threads, Zen 4: 5 rows 1.17 steps, 9 rows 1.89.
  // With the straight line alone (flat_rows 1) two slots at acceptance 0.7 priced a pass of 4
  // rows at 1.45 steps instead of about 1.12, and their drafts read less of their prompts than
  // paid: `serve` at 2 clients made 44.5 tok/s against 49.2 with this line (docs/benchmarks.md).
  int32_t flat_rows = 5;
  double flat_row_cost = 0.04;
};

// What a slot gains per unit of time from γ drafts per round over plain batched steps, when
// `active` slots each draft γ with per-draft acceptance `acceptance` (independent drafts:
// E(γ) = (1 - a^(γ+1)) / (1 - a) tokens a round) and their rows share one target pass of
// pass(active (γ+1)) steps plus γ batched draft steps of draft_cost pass(active) each; plain steps
// give active tokens for pass(active). pass(k) is 1 + flat_row_cost for each row past the first
// up to flat_rows, row_cost for each beyond. 1.0 at γ = 0.
double batch_gamma_gain(const BatchCost& cost, int32_t active, double acceptance, int32_t gamma);

// The γ (0..8) with the largest batch_gamma_gain: a cap on the request's own draft length. A
// slot alone is not capped (its own draft-length rule decides: real acceptance comes in runs,
// which the independent-draft model undervalues); active < 1 counts as alone. With the default
// costs and draft cost 0.26: acceptance 0.7 gives γ 1 from 2 to 4 slots (at 4 a gain of 0.1 %,
// so that the draft model never reads a prompt there: catch_up_pays) and 0 at 8; 0.5 gives 1 at
// 2 and 3 slots, 0 from 4; 0.9 gives 2 at 2 slots, 1 at 3 and 4, 0 at 8.
int32_t batch_gamma_cap(const BatchCost& cost, int32_t active, double acceptance);

// Whether a draft model that has `lag` committed tokens still to read (a lazily started draft
// that has not drafted yet) should read them now, with `tokens_left` tokens left to generate,
// `active` slots sharing the passes and drafting expected to gain `gain` (batch_gamma_gain of the
// cap's γ). Alone: while lag <= 4 * tokens_left (measured for one client of `serve`: the 0.5B
// draft reads a prompt token in about 2 ms and speculation saved 8 to 15 ms per generated token,
// T 0.7 and 0; docs/benchmarks.md). In a batch every slot waits while the draft reads, so the
// read costs active * lag * draft_read_cost, against what drafting saves this slot over the
// rest of its answer: tokens_left plain batched steps of pass(active), times
// 1 - 1 / gain. The earlier rule, lag * active <= 4 * tokens_left, let 2 slots read a
// 190-token prompt for a 96-token answer whose drafts (γ 1 at acceptance 0.7) save about a tenth
// of its steps. (A paired A/B of the two rules at 2 clients of `serve` stayed inside the runs'
// scatter: docs/benchmarks.md.)
bool catch_up_pays(const BatchCost& cost, int32_t lag, int32_t tokens_left, int32_t active,
                   double gain);

}  // namespace specdec
