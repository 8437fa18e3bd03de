// A rule on which tokens may come next, given the text generated so far: a grammar (structured
// output: JSON, a JSON Schema, GBNF). Like the penalties (sampling/penalties.h) it makes the
// target's next-token distribution depend on the text, and speculative decoding handles it the
// same way: the verify pass's row j follows the committed text and drafts y_1..y_j, so the rule
// is applied as if those had been generated (`extra`), and the draft applies it to its own q (so
// that q proposes only allowed tokens and resembles the constrained p). The output distribution
// is then the target's constrained one, and greedy output the target-only constrained output.
#pragma once

#include <cstdint>
#include <span>

namespace specdec {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // A new sequence: nothing generated yet (the prompt is not constrained).
  virtual void reset() = 0;
  // One more committed token; it must be one that apply() allowed.
  virtual void add(int32_t token) = 0;

  // Sets to -inf the logits of the tokens that may not follow the generated text and then
  // `extra`. Without ids, logits[t] is token t's logit; with ids, logits[j] is token ids[j]'s
  // (a draft's vocabulary subset). With only_argmax, only the row's argmax (ties to the lowest
  // index, as greedy decoding breaks them) must come out as on the fully masked row: tokens are
  // masked from the top until the highest one left is allowed, which greedy decoding needs and
  // which costs far less than a whole mask. Returns false when no allowed token has a finite
  // logit: a draft stops drafting there; for the target it is an error.
  virtual bool apply(std::span<float> logits, std::span<const int32_t> extra,
                     std::span<const int32_t> ids, bool only_argmax) = 0;

  // How many leading tokens of `tokens` may follow the generated text one after another (a
  // prompt-lookup draft is cut there: its one-hot proposals ignore the rule).
  virtual int32_t allowed_prefix(std::span<const int32_t> tokens) = 0;
};

}  // namespace specdec
