// How a request that shares its target passes with other slots' requests sizes its rounds.
//
// A target pass over k rows costs about one weight read plus k rows of integer work; on a
// 2-core CPU the rows turn compute bound at once (verify-cost on the Qwen2.5-Coder 1.5B: each
// row past the first adds 0.12 to 0.2 of a decode step), so with several slots drafting, their
// verify rows add up and speculation stops paying. A per-slot model with row cost r = 0.15,
// draft step c = 0.26 and acceptance 0.7 (tokens per round E(γ) = (1 - 0.7^(γ+1)) / 0.3 against
// a pass of 1 + (A(γ+1) - 1) r plus γ batched draft steps) gives 1.12x over plain batched steps
// at γ = 1 with 2 slots, 1.01x with 4, less beyond; `serve` measured γ = 1 at 4 slots 8 % slower
// than no drafts, twice (docs/benchmarks.md). These rules only change γ and when the draft
// reads, never what a greedy request emits, and apply only where the caller lets γ follow the
// batch.
#pragma once

#include <cstdint>
#include <limits>

namespace specdec {

inline constexpr int32_t kNoGammaCap = std::numeric_limits<int32_t>::max();

// The most drafts per round for each of `active` slots when all their verify rows (γ + 1 each)
// should add up to at most `verify_rows`: 0 means plain target steps. A slot alone is not
// capped (its own draft-length rule decides); active < 1 counts as alone.
int32_t batch_gamma_cap(int32_t verify_rows, int32_t active);

// Whether a draft model that has `lag` committed tokens still to read (a lazily started draft
// that has not drafted yet) should read them now, with `tokens_left` tokens left to generate
// and `active` slots sharing the passes. On the Qwen2.5-Coder pair the 0.5B draft reads a prompt
// token in about 2 ms (a third of the target's prefill per token), and speculation saved 8 to
// 15 ms per generated token for one client of `serve` (T 0.7 and 0; docs/benchmarks.md), less
// per slot as the batch grows. So the draft catches up only while lag * active <= 4 *
// tokens_left: a long prompt with a short answer in a full batch is not worth reading twice.
bool catch_up_pays(int32_t lag, int32_t tokens_left, int32_t active);

}  // namespace specdec
