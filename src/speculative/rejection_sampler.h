// The accept/reject rule of speculative sampling (Leviathan et al. 2023; Chen et al. 2023).
//
// Draft tokens y_1..y_γ were sampled from the draft's distributions q_1..q_γ; the target's
// distributions at the same positions are p_1..p_{γ+1}. Accepting y_i with probability
// min(1, p_i(y_i)/q_i(y_i)) and, at the first rejection, emitting a token from the residual
// norm(max(0, p_i - q_i)) makes every emitted token distributed exactly as p_i:
//   P(emit x) = q(x) min(1, p(x)/q(x)) + P(reject) r(x)/R
//             = min(p(x), q(x)) + max(0, p(x) - q(x))        [P(reject) = 1 - Σ min(p, q) = R]
//             = p(x).
// After all γ are accepted, a bonus token comes from p_{γ+1}, which the verify pass computed
// anyway. Conditioning on acceptance never leaks into later positions because each later p_j is
// the target's distribution given the (now committed) earlier tokens.
#pragma once

#include <cstdint>
#include <span>

#include "sampling/distribution.h"
#include "sampling/rng.h"

namespace specdec {

struct VerifyResult {
  int32_t n_accepted;  // drafts accepted, 0..γ
  int32_t next_token;  // the correction (on rejection) or the bonus (all accepted)
  bool bonus;          // true when all γ drafts were accepted
};

// drafts: y_1..y_γ; q[i]: the draft's filtered distribution that y_{i+1} was sampled from;
// p[i] (γ+1 of them): the target's filtered distribution at the same position, same params.
// Sampling mode consumes, in order, one rng.uniform() per accept test and one per correction or
// bonus draw, so a run is reproducible from its seed. Greedy mode consumes none: it accepts while
// y_i == argmax p_i and emits argmax p_i at the first mismatch (or argmax p_{γ+1} as the bonus).
VerifyResult verify_drafts(std::span<const int32_t> drafts, std::span<const Distribution> q,
                           std::span<const Distribution> p, bool greedy, Rng& rng);

}  // namespace specdec
