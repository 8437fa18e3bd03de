// llama-server's reasoning budget (--reasoning-budget N, the request's reasoning_budget_tokens):
// a thinking model may write at most N tokens inside its <think> block; then the budget's
// message and the closing tag are forced, token by token, and the answer follows. Without it a
// thinking model can spend all of max_tokens reasoning and never answer.
//
// As a TokenConstraint (sampling/token_constraint.h) it is, like a grammar, a function of the
// text so far: while it forces, every token but the next forced one is masked, for the target's
// distributions and the draft's alike. So speculation stays exact (the output distribution is
// the target's under the same rule) and greedy speculative output equals target-only output.
//
// The states, over the generated tokens (the prompt only says whether the text starts inside a
// block):
//   Idle      outside a block; the start tag's tokens open one (Counting, the budget full);
//   Counting  inside a block, `left` tokens to go: the end tag's tokens close it (Idle: a later
//             block gets a budget of its own); at 0 left the forcing starts, unless the text
//             ends inside a UTF-8 sequence: then the tokens that complete it come first;
//   Forcing   the forced tokens one by one; after the last, Idle.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sampling/token_constraint.h"
#include "tokenizer/chat_template.h"  // kThinkOpen, kThinkClose
#include "tokenizer/tokenizer.h"

namespace specdec {

struct ReasoningBudgetSpec {
  std::vector<int32_t> start;   // the block's opening tag, as tokens ("<think>")
  std::vector<int32_t> end;     // its closing tag ("</think>")
  std::vector<int32_t> forced;  // the message and the closing tag, forced when the budget is spent
  int32_t budget = 0;           // tokens allowed inside a block (>= 0)
  bool opened = false;          // the prompt ends inside a block: the text starts Counting
};

// The spec for a thinking model's <think> blocks: the tags as the tokenizer writes them (special
// tokens where the vocabulary has them), `message` and the closing tag as the forced tokens, and
// whether the prompt ends inside a block (its last opening tag comes after its last closing
// tag: a template or a prefill that opens the block for the model).
ReasoningBudgetSpec reasoning_budget_spec(const Tokenizer& tokenizer,
                                          std::span<const int32_t> prompt, int32_t budget,
                                          const std::string& message);

class ReasoningBudgetConstraint : public TokenConstraint {
 public:
  // token_bytes: a token's bytes (for the UTF-8 check before forcing).
  ReasoningBudgetConstraint(ReasoningBudgetSpec spec,
                            std::function<std::string(int32_t)> token_bytes);

  void reset() override;
  void add(int32_t token) override;
  bool apply(std::span<float> logits, std::span<const int32_t> extra, std::span<const int32_t> ids,
             bool only_argmax) override;
  int32_t allowed_prefix(std::span<const int32_t> tokens) override;

  // Whether the committed text is being forced now, and how many times a budget ran out.
  bool forcing() const { return committed_.mode == Mode::Forcing; }
  int32_t budgets_spent() const { return spent_; }

 private:
  enum class Mode { Idle, Counting, Forcing };
  struct State {
    Mode mode = Mode::Idle;
    int32_t left = 0;       // Counting: tokens the block may still hold
    int32_t matched = 0;    // Idle: start-tag tokens matched; Counting: end-tag tokens matched
    int32_t forced = 0;     // Forcing: forced tokens written
    int32_t utf8_need = 0;  // Counting: continuation bytes the block's text still owes
  };

  // The state after one more token; false (to unchanged) when the token is not the forced one.
  bool advance(const State& from, int32_t token, State& to) const;
  // After `from`'s forcing has written its last token, or a count that reached 0.
  State settle(State s) const;
  // The state after the committed text and `extra`; false when `extra` breaks the forcing.
  bool state_after(std::span<const int32_t> extra, State& out) const;

  ReasoningBudgetSpec spec_;
  std::function<std::string(int32_t)> token_bytes_;
  State committed_;
  int32_t spent_ = 0;
};

}  // namespace specdec
