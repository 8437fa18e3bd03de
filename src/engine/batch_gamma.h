// How a request that shares its target passes with other slots' requests sizes its rounds.
//
// A target pass over k rows costs about one weight read plus k rows of integer work; on a
// 2-core CPU the rows turn compute bound soon (verify-cost: each row past the first adds 0.12
// to 0.2 of a decode step), so with several slots drafting the verify rows of all of them add
// up and speculation stops paying. These rules only change γ and when the draft reads, never
// what a greedy request emits, and they apply only where the caller lets γ follow the batch.
#pragma once

#include <cstdint>

namespace specdec {

// The most drafts per round for each of `active` slots when all their verify rows (γ + 1 each)
// should fit within `verify_rows` rows (one tile of the widest matmul kernel): 0 means plain
// target steps. active < 1 counts as 1.
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
