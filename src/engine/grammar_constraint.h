// A grammar as a TokenConstraint (sampling/token_constraint.h): the bridge between the grammar
// module (grammar/grammar.h, grammar/token_mask.h) and the decoder. It keeps the grammar's state
// at the committed text, and the states after a round's drafts (each verify row and each draft
// step asks for the state after the drafts before it, in order, so they are computed once each).
//
// A lazy grammar (a trigger given) leaves the text free until the trigger appears in it; from
// the trigger's first byte on, the text must follow the grammar (whose sentences then start
// with the trigger). This is how a tool call written by choice (tool_choice auto) becomes a
// valid one: the reply may be prose, but once it opens "<tool_call>" the call's JSON follows
// the tools' schemas. A token that completes the trigger is checked with the bytes it carries
// past it; if the grammar refuses those, the text stays free from then on (the reply is then
// content, as without the grammar). Whether and how a token is masked is a function of the
// text before it, so speculation stays exact as with any grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
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
  // `trigger` empty: the grammar holds from the first token on.
  GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                    std::shared_ptr<const GrammarVocab> vocab, std::string trigger = "");

  void reset() override;
  void add(int32_t token) override;
  bool apply(std::span<float> logits, std::span<const int32_t> extra, std::span<const int32_t> ids,
             bool only_argmax) override;
  int32_t allowed_prefix(std::span<const int32_t> tokens) override;

  // Whether the committed text is a whole sentence of the grammar (lazy: from the trigger on;
  // before the trigger, or once the grammar gave way, any text is).
  bool complete() const { return committed_.mode != Mode::Active || committed_.state->complete(); }
  // Lazy: whether the committed text holds the trigger and the grammar holds from it on.
  bool active() const { return committed_.mode == Mode::Active; }
  const GrammarMasker& masker() const { return masker_; }
  // Rows masked by walking the argmax down (only_argmax) and by a whole mask.
  int64_t argmax_rows() const { return argmax_rows_; }
  int64_t mask_rows() const { return mask_rows_; }

 private:
  // Lazy grammars: Waiting for the trigger, Active (the grammar holds), or Free (the bytes after
  // the trigger did not start a sentence: nothing is masked any more). Eager ones are Active.
  enum class Mode { Waiting, Active, Free };
  struct Step {
    Mode mode = Mode::Active;
    std::optional<GrammarState> state;  // Active: the grammar's state
    std::string tail;                   // Waiting: the text's last bytes, fewer than the trigger's
  };

  // The step after `from` and one more token; false when the grammar rejects the token.
  bool advance(const Step& from, int32_t token, Step& to) const;
  // The step after the committed text and then `extra`; null when the grammar rejects it.
  const Step* step_after(std::span<const int32_t> extra);

  std::shared_ptr<const Grammar> grammar_;
  GrammarMasker masker_;
  std::string trigger_;
  Step committed_;
  // path_steps_[k]: the step after the committed text and path_[0..k) (k = 0: committed_).
  std::vector<int32_t> path_;
  std::vector<Step> path_steps_;
  int64_t argmax_rows_ = 0, mask_rows_ = 0;
};

}  // namespace specdec
