#include "engine/grammar_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace specdec {

namespace {

bool bit(std::span<const uint64_t> bits, int32_t token) {
  return ((bits[static_cast<size_t>(token) / 64] >> (static_cast<uint32_t>(token) % 64)) & 1) != 0;
}

// The first index of the highest value (the tie rule of greedy decoding); -1 when every value
// is -inf or NaN.
int64_t first_max(std::span<const float> v) {
  int64_t best = -1;
  float top = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] > top) {
      top = v[i];
      best = static_cast<int64_t>(i);
    }
  }
  return best;
}

// Greedy rows: the argmax is usually allowed (the model follows the format), so masking the
// tokens above it one by one beats a whole mask; past this many forbidden tops the whole mask
// is cheaper (and cached for the next time the state comes back).
constexpr int kArgmaxTries = 16;

}  // namespace

std::shared_ptr<const GrammarVocab> make_grammar_vocab(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    // Control tokens (<|im_start|>, FIM markers) stand for no text; token_bytes gives "".
    if (tokenizer.token_type(id) != kTokenControl)
      bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  }
  return std::make_shared<const GrammarVocab>(std::move(bytes), tokenizer.eog_ids());
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const GrammarVocab> vocab, std::string trigger)
    : grammar_(std::move(grammar)),
      masker_(std::move(vocab)),
      trigger_(std::move(trigger)),
      committed_{Mode::Active, GrammarState(grammar_), ""} {
  reset();
}

void GrammarConstraint::reset() {
  committed_ = Step{trigger_.empty() ? Mode::Active : Mode::Waiting, GrammarState(grammar_), ""};
  if (committed_.mode == Mode::Waiting) committed_.state.reset();
  path_.clear();
  path_steps_.assign(1, committed_);
}

bool GrammarConstraint::advance(const Step& from, int32_t token, Step& to) const {
  to = from;
  switch (from.mode) {
    case Mode::Free:
      return true;
    case Mode::Active:
      return masker_.advance(*to.state, token);
    case Mode::Waiting:
      break;
  }
  // The trigger may span tokens: look for it in the held tail and this token's bytes.
  std::string text = from.tail + masker_.vocab().bytes(token);
  const size_t at = text.find(trigger_);
  if (at == std::string::npos) {
    const size_t keep = std::min(text.size(), trigger_.size() - 1);
    to.tail = text.substr(text.size() - keep);
    return true;
  }
  to.tail.clear();
  to.state.emplace(grammar_);
  to.mode = to.state->accept(std::string_view(text).substr(at)) ? Mode::Active : Mode::Free;
  if (to.mode == Mode::Free) to.state.reset();
  return true;
}

void GrammarConstraint::add(int32_t token) {
  Step next;
  if (!advance(committed_, token, next)) {
    fail("grammar: token ", token, " was committed although the grammar does not allow it");
  }
  committed_ = std::move(next);
  // The round's path starts at the committed text; a committed draft is its first step.
  if (!path_.empty() && path_.front() == token) {
    path_.erase(path_.begin());
    path_steps_.erase(path_steps_.begin());
  } else {
    path_.clear();
    path_steps_.assign(1, committed_);
  }
}

const GrammarConstraint::Step* GrammarConstraint::step_after(std::span<const int32_t> extra) {
  size_t k = 0;
  while (k < extra.size() && k < path_.size() && path_[k] == extra[k]) ++k;
  path_.resize(k);
  path_steps_.erase(path_steps_.begin() + static_cast<std::ptrdiff_t>(k) + 1, path_steps_.end());
  for (; k < extra.size(); ++k) {
    Step next;
    if (!advance(path_steps_.back(), extra[k], next)) return nullptr;
    path_.push_back(extra[k]);
    path_steps_.push_back(std::move(next));
  }
  return &path_steps_.back();
}

bool GrammarConstraint::apply(std::span<float> logits, std::span<const int32_t> extra,
                              std::span<const int32_t> ids, bool only_argmax) {
  const Step* step = step_after(extra);
  const auto token_of = [&ids](size_t j) { return ids.empty() ? static_cast<int32_t>(j) : ids[j]; };
  if (step == nullptr) {
    for (float& l : logits) l = -std::numeric_limits<float>::infinity();
    return false;
  }
  if (step->mode != Mode::Active) {  // free text: nothing to mask
    return std::any_of(logits.begin(), logits.end(), [](float l) {
      return !std::isnan(l) && l != -std::numeric_limits<float>::infinity();
    });
  }
  const GrammarState* state = &*step->state;
  if (only_argmax) {
    for (int tries = 0; tries < kArgmaxTries; ++tries) {
      const int64_t top = first_max(logits);
      if (top < 0) return false;  // nothing finite is left
      if (masker_.allows(*state, token_of(static_cast<size_t>(top)))) {
        ++argmax_rows_;
        return true;
      }
      logits[static_cast<size_t>(top)] = -std::numeric_limits<float>::infinity();
    }
  }
  ++mask_rows_;
  const std::span<const uint64_t> allowed = masker_.allowed(*state);
  bool any = false;
  for (size_t j = 0; j < logits.size(); ++j) {
    if (!bit(allowed, token_of(j))) {
      logits[j] = -std::numeric_limits<float>::infinity();
    } else if (!std::isnan(logits[j]) && logits[j] != -std::numeric_limits<float>::infinity()) {
      any = true;
    }
  }
  return any;
}

int32_t GrammarConstraint::allowed_prefix(std::span<const int32_t> tokens) {
  // Through the round's path: the states it reaches are those the verify rows ask for next (and
  // a model draft's, which the draft steps computed, are found there already).
  size_t n = 0;
  while (n < tokens.size() && step_after(tokens.first(n + 1)) != nullptr) ++n;
  return static_cast<int32_t>(n);
}

}  // namespace specdec
