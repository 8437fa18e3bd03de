#include "engine/grammar_constraint.h"

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
                                     std::shared_ptr<const GrammarVocab> vocab)
    : grammar_(std::move(grammar)), masker_(std::move(vocab)), committed_(grammar_) {
  reset();
}

void GrammarConstraint::reset() {
  committed_ = GrammarState(grammar_);
  path_.clear();
  path_states_.assign(1, committed_);
}

void GrammarConstraint::add(int32_t token) {
  if (!masker_.advance(committed_, token)) {
    fail("grammar: token ", token, " was committed although the grammar does not allow it");
  }
  // The round's path starts at the committed text; a committed draft is its first step.
  if (!path_.empty() && path_.front() == token) {
    path_.erase(path_.begin());
    path_states_.erase(path_states_.begin());
  } else {
    path_.clear();
    path_states_.assign(1, committed_);
  }
}

const GrammarState* GrammarConstraint::state_after(std::span<const int32_t> extra) {
  size_t k = 0;
  while (k < extra.size() && k < path_.size() && path_[k] == extra[k]) ++k;
  path_.resize(k);
  path_states_.erase(path_states_.begin() + static_cast<std::ptrdiff_t>(k) + 1, path_states_.end());
  for (; k < extra.size(); ++k) {
    GrammarState next = path_states_.back();
    if (!masker_.advance(next, extra[k])) return nullptr;
    path_.push_back(extra[k]);
    path_states_.push_back(std::move(next));
  }
  return &path_states_.back();
}

bool GrammarConstraint::apply(std::span<float> logits, std::span<const int32_t> extra,
                              std::span<const int32_t> ids, bool only_argmax) {
  const GrammarState* state = state_after(extra);
  const auto token_of = [&ids](size_t j) { return ids.empty() ? static_cast<int32_t>(j) : ids[j]; };
  if (state == nullptr) {
    for (float& l : logits) l = -std::numeric_limits<float>::infinity();
    return false;
  }
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
  while (n < tokens.size() && state_after(tokens.first(n + 1)) != nullptr) ++n;
  return static_cast<int32_t>(n);
}

}  // namespace specdec
