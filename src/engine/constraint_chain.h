// Several TokenConstraints (sampling/token_constraint.h) as one, for a request that has more
// than one rule (a grammar and a reasoning budget): a token is allowed where every rule allows
// it. Each rule masks the row in turn, so a later one sees the earlier ones' masks (the
// reasoning budget, whose forced token must come out, goes first).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sampling/token_constraint.h"

namespace specdec {

class ConstraintChain : public TokenConstraint {
 public:
  explicit ConstraintChain(std::vector<TokenConstraint*> rules) : rules_(std::move(rules)) {}

  void reset() override {
    for (TokenConstraint* r : rules_) r->reset();
  }
  void add(int32_t token) override {
    for (TokenConstraint* r : rules_) r->add(token);
  }
  bool apply(std::span<float> logits, std::span<const int32_t> extra, std::span<const int32_t> ids,
             bool only_argmax) override {
    for (TokenConstraint* r : rules_) {
      if (!r->apply(logits, extra, ids, only_argmax)) return false;
    }
    return true;
  }
  int32_t allowed_prefix(std::span<const int32_t> tokens) override {
    auto n = static_cast<int32_t>(tokens.size());
    for (TokenConstraint* r : rules_) n = std::min(n, r->allowed_prefix(tokens.first(n)));
    return n;
  }

 private:
  std::vector<TokenConstraint*> rules_;  // not owned
};

}  // namespace specdec
