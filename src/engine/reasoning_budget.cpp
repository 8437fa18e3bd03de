#include "engine/reasoning_budget.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

#include "common/error.h"

namespace specdec {
namespace {

// The continuation bytes a text still owes after `bytes`, given `need` before them.
int32_t utf8_need_after(int32_t need, const std::string& bytes) {
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    if (need > 0 && (b & 0xC0) == 0x80) {
      --need;
    } else if ((b & 0xE0) == 0xC0) {
      need = 1;
    } else if ((b & 0xF0) == 0xE0) {
      need = 2;
    } else if ((b & 0xF8) == 0xF0) {
      need = 3;
    } else {
      need = 0;  // ASCII, or a stray byte that no later byte can complete
    }
  }
  return need;
}

// One more token against a tag being matched: how many of its tokens the text now ends with
// (as llama.cpp's matcher counts: a mismatch restarts at the token itself).
int32_t match_next(const std::vector<int32_t>& tag, int32_t matched, int32_t token) {
  if (tag.empty()) return 0;
  if (token == tag[static_cast<size_t>(matched)]) return matched + 1;
  return token == tag[0] ? 1 : 0;
}

// Where `tag` last ends in `tokens`, plus one; 0 when it does not occur.
size_t last_end_of(std::span<const int32_t> tokens, const std::vector<int32_t>& tag) {
  if (tag.empty() || tag.size() > tokens.size()) return 0;
  for (size_t end = tokens.size(); end >= tag.size(); --end) {
    if (std::equal(tag.begin(), tag.end(),
                   tokens.begin() + static_cast<std::ptrdiff_t>(end - tag.size()))) {
      return end;
    }
  }
  return 0;
}

}  // namespace

ReasoningBudgetSpec reasoning_budget_spec(const Tokenizer& tokenizer,
                                          std::span<const int32_t> prompt, int32_t budget,
                                          const std::string& message) {
  ReasoningBudgetSpec spec;
  spec.start = tokenizer.encode(kThinkOpen, false, true);
  spec.end = tokenizer.encode(kThinkClose, false, true);
  spec.forced = tokenizer.encode(message + std::string(kThinkClose), false, true);
  spec.budget = budget;
  const size_t opened = last_end_of(prompt, spec.start);
  spec.opened = opened > 0 && opened > last_end_of(prompt, spec.end);
  return spec;
}

ReasoningBudgetConstraint::ReasoningBudgetConstraint(
    ReasoningBudgetSpec spec, std::function<std::string(int32_t)> token_bytes)
    : spec_(std::move(spec)), token_bytes_(std::move(token_bytes)) {
  if (spec_.budget < 0) fail("reasoning budget: ", spec_.budget, " tokens (expected >= 0)");
  if (spec_.end.empty() || spec_.forced.empty()) {
    fail("reasoning budget: the closing tag and the forced tokens must not be empty");
  }
  reset();
}

ReasoningBudgetConstraint::State ReasoningBudgetConstraint::settle(State s) const {
  if (s.mode == Mode::Counting && s.left <= 0 && s.utf8_need == 0) {
    s.mode = Mode::Forcing;
    s.forced = 0;
    s.matched = 0;
  }
  return s;
}

void ReasoningBudgetConstraint::reset() {
  committed_ = State{};
  spent_ = 0;
  if (spec_.opened) {
    committed_.mode = Mode::Counting;
    committed_.left = spec_.budget;
    committed_ = settle(committed_);
    if (committed_.mode == Mode::Forcing) ++spent_;
  }
}

bool ReasoningBudgetConstraint::advance(const State& from, int32_t token, State& to) const {
  // Only a block's text is checked for half-written characters (token_bytes_ copies a token's
  // bytes, and most tokens are the answer's): the block opens after its tag's last byte, a
  // whole character, and the forcing, which ends it, is the only thing that waits for one.
  State s = from;
  if (s.mode == Mode::Forcing) {
    if (token != spec_.forced[static_cast<size_t>(s.forced)]) return false;
    if (++s.forced == static_cast<int32_t>(spec_.forced.size())) s = State{};
    to = s;
    return true;
  }
  if (s.mode == Mode::Idle) {
    s.matched = match_next(spec_.start, s.matched, token);
    if (!spec_.start.empty() && s.matched == static_cast<int32_t>(spec_.start.size())) {
      s.mode = Mode::Counting;
      s.left = spec_.budget;
      s.matched = 0;
      s.utf8_need = 0;
      s = settle(s);
    }
  } else {  // Counting
    s.utf8_need = utf8_need_after(s.utf8_need, token_bytes_(token));
    s.matched = match_next(spec_.end, s.matched, token);
    if (s.matched == static_cast<int32_t>(spec_.end.size())) {
      s = State{};  // closed by the model: the next block counts anew
    } else {
      s.left = s.left > 0 ? s.left - 1 : 0;
      s = settle(s);
    }
  }
  to = s;
  return true;
}

bool ReasoningBudgetConstraint::state_after(std::span<const int32_t> extra, State& out) const {
  State s = committed_;
  for (int32_t t : extra) {
    State next;
    if (!advance(s, t, next)) return false;
    s = next;
  }
  out = s;
  return true;
}

void ReasoningBudgetConstraint::add(int32_t token) {
  State next;
  if (!advance(committed_, token, next)) {
    fail("reasoning budget: token ", token, " committed where the budget forces token ",
         spec_.forced[static_cast<size_t>(committed_.forced)]);
  }
  if (committed_.mode != Mode::Forcing && next.mode == Mode::Forcing) ++spent_;
  committed_ = next;
}

bool ReasoningBudgetConstraint::apply(std::span<float> logits, std::span<const int32_t> extra,
                                      std::span<const int32_t> ids, bool /*only_argmax*/) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  State s;
  const bool ok = state_after(extra, s);
  if (ok && s.mode != Mode::Forcing) return true;  // nothing masked
  // Forcing: only the next forced token (a whole mask; it lasts a few tokens per block).
  const int32_t want = ok ? spec_.forced[static_cast<size_t>(s.forced)] : -1;
  bool kept = false;
  for (size_t j = 0; j < logits.size(); ++j) {
    const int32_t id = ids.empty() ? static_cast<int32_t>(j) : ids[j];
    if (id == want) {
      // Forced whatever the model thinks of it (a -inf from a bias or a penalty included).
      if (!(logits[j] > kMasked)) logits[j] = 0.0f;
      kept = true;
    } else {
      logits[j] = kMasked;
    }
  }
  return kept;
}

int32_t ReasoningBudgetConstraint::allowed_prefix(std::span<const int32_t> tokens) {
  State s = committed_;
  for (size_t i = 0; i < tokens.size(); ++i) {
    State next;
    if (!advance(s, tokens[i], next)) return static_cast<int32_t>(i);
    s = next;
  }
  return static_cast<int32_t>(tokens.size());
}

}  // namespace specdec
