// Test-only: deliberately wrong variants of the rejection rule, so the statistical tests can
// show that they detect each mistake (a test that cannot fail proves nothing). Production code
// includes rejection_sampler.h only; the decoder accepts any VerifyFn so tests can plug these in.
#pragma once

#include <cstdint>
#include <span>

#include "speculative/rejection_sampler.h"

namespace specdec {

enum class RuleVariant {
  Correct,
  // On rejection, draw the correction from p_i instead of norm(max(0, p_i - q_i)): over-weights
  // the tokens the draft already proposes; output = min(p, q) + R p != p.
  ResampleFromP,
  // Residual restricted to q_i's support: forgets ids the draft filtered out (top-k/top-p) but the
  // target keeps, so those ids can never be emitted after a rejection.
  ResidualOnDraftSupport,
  // Bonus drawn from p_γ (the last draft position) instead of p_{γ+1}: an off-by-one that emits
  // the bonus from the wrong context. (Skipping the bonus altogether would NOT be a bug: the next
  // round would simply draft that position again, so it is lossless, only slower.)
  BonusFromLastDraftPos,
  // Accept every draft: output follows the draft model.
  AcceptAlways,
  // Accept with probability p(y) instead of min(1, p(y)/q(y)): forgets the division by q.
  IgnoreRatio,
};

using VerifyFn = VerifyResult (*)(std::span<const int32_t>, std::span<const Distribution>,
                                  std::span<const Distribution>, bool, Rng&);

// The implementation behind verify_drafts, with the rule selectable.
VerifyResult verify_drafts_with_rule(std::span<const int32_t> drafts,
                                     std::span<const Distribution> q,
                                     std::span<const Distribution> p, bool greedy, Rng& rng,
                                     RuleVariant rule);

// A plain function pointer running the given rule (for SpeculativeDecoder::set_verifier).
VerifyFn verifier_for(RuleVariant rule);

const char* rule_name(RuleVariant rule);

}  // namespace specdec
