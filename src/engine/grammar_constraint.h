// A grammar as a TokenConstraint (sampling/token_constraint.h): the bridge between the grammar
// module (grammar/grammar.h, grammar/token_mask.h) and the decoder. It keeps the grammar's state
// at the committed text, and the states after a round's drafts (each verify row and each draft
// step asks for the state after the drafts before it, in order, so they are computed once each).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "sampling/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

// The vocabulary as a grammar sees it: each token's bytes (control tokens none: a grammar never
// matches them) and the end-of-generation tokens, which it allows once the text is complete.
std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tokenizer);

class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                    std::shared_ptr<const GrammarVocab> vocab);

  void reset() override;
  void add(int32_t token) override;
  bool apply(std::span<float> logits, std::span<const int32_t> extra, std::span<const int32_t> ids,
             bool only_argmax) override;
  int32_t allowed_prefix(std::span<const int32_t> tokens) override;

  // Whether the committed text is a whole sentence of the grammar.
  bool complete() const { return committed_.complete(); }
  const GrammarMasker& masker() const { return masker_; }
  // Rows masked by walking the argmax down (only_argmax) and by a whole mask.
  int64_t argmax_rows() const { return argmax_rows_; }
  int64_t mask_rows() const { return mask_rows_; }

 private:
  // The state after the committed text and then `extra`; null when the grammar rejects it.
  const GrammarState* state_after(std::span<const int32_t> extra);

  std::shared_ptr<const Grammar> grammar_;
  GrammarMasker masker_;
  GrammarState committed_;
  // path_states_[k]: the state after the committed text and path_[0..k) (k = 0: committed_).
  std::vector<int32_t> path_;
  std::vector<GrammarState> path_states_;
  int64_t argmax_rows_ = 0, mask_rows_ = 0;
};

}  // namespace specdec
