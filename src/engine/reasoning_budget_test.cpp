// The reasoning budget's state machine on made-up tokens: counting inside a block, forcing the
// message and the closing tag once the budget is spent, a block the model closes itself, the
// UTF-8 wait, masks for the target's and a draft subset's rows, and lookup drafts cut at the
// first token the forcing refuses.
#include "engine/reasoning_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/constraint_chain.h"

namespace specdec {
namespace {

// Tokens: 1 "<", 2 "think>", 3 "</think>", 4 "a", 5 "\xC3" (opens a 2-byte character), 6 "\xA9"
// (completes it), 7 "OK", 8 "." .
constexpr int32_t kLt = 1, kThink = 2, kClose = 3, kA = 4, kLead = 5, kTrail = 6, kOk = 7, kDot = 8,
                  kVocab = 9;

std::string bytes_of(int32_t id) {
  static const std::map<int32_t, std::string> kBytes = {
      {kLt, "<"},      {kThink, "think>"}, {kClose, "</think>"}, {kA, "a"},
      {kLead, "\xC3"}, {kTrail, "\xA9"},   {kOk, "OK"},          {kDot, "."}};
  const auto it = kBytes.find(id);
  return it == kBytes.end() ? std::string() : it->second;
}

ReasoningBudgetSpec spec(int32_t budget, bool opened = false) {
  return ReasoningBudgetSpec{{kLt, kThink}, {kClose}, {kOk, kDot, kClose}, budget, opened};
}

// The tokens a row allows: those with a finite logit after apply().
std::vector<int32_t> allowed(ReasoningBudgetConstraint& c, std::vector<int32_t> extra = {}) {
  std::vector<float> row(kVocab, 1.0f);
  EXPECT_TRUE(c.apply(row, extra, {}, false));
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < kVocab; ++t) {
    if (std::isfinite(row[static_cast<size_t>(t)])) ids.push_back(t);
  }
  return ids;
}

const std::vector<int32_t> kAll = {0, 1, 2, 3, 4, 5, 6, 7, 8};

TEST(ReasoningBudget, ForcesTheMessageAndTheTagOnceTheBudgetIsSpent) {
  ReasoningBudgetConstraint c(spec(3), bytes_of);
  EXPECT_EQ(allowed(c), kAll);
  for (int32_t t : {kA, kLt, kThink}) c.add(t);  // text before the block does not count
  for (int32_t t : {kA, kA}) {
    EXPECT_EQ(allowed(c), kAll);
    c.add(t);
  }
  EXPECT_FALSE(c.forcing());
  c.add(kA);  // the third token inside: the budget is spent
  EXPECT_TRUE(c.forcing());
  EXPECT_EQ(c.budgets_spent(), 1);
  for (int32_t t : {kOk, kDot, kClose}) {
    EXPECT_EQ(allowed(c), std::vector<int32_t>{t});
    c.add(t);
  }
  EXPECT_FALSE(c.forcing());
  EXPECT_EQ(allowed(c), kAll);  // the answer is free
}

TEST(ReasoningBudget, ABlockTheModelClosesCostsNothingAndTheNextCountsAnew) {
  ReasoningBudgetConstraint c(spec(2, /*opened=*/true), bytes_of);
  c.add(kA);
  c.add(kClose);  // closed with one token to spare
  c.add(kA);
  c.add(kA);
  c.add(kA);
  EXPECT_FALSE(c.forcing());
  for (int32_t t : {kLt, kThink, kA}) c.add(t);
  EXPECT_FALSE(c.forcing());
  c.add(kA);
  EXPECT_TRUE(c.forcing());
  // A start tag broken by another token does not open a block.
  ReasoningBudgetConstraint d(spec(1), bytes_of);
  for (int32_t t : {kLt, kA, kThink, kA, kA}) d.add(t);
  EXPECT_FALSE(d.forcing());
  for (int32_t t : {kLt, kLt, kThink, kA}) d.add(t);  // "<" again restarts the match
  EXPECT_TRUE(d.forcing());
}

TEST(ReasoningBudget, ForcingWaitsForAHalfWrittenCharacter) {
  ReasoningBudgetConstraint c(spec(2, /*opened=*/true), bytes_of);
  c.add(kA);
  c.add(kLead);  // budget spent, but the text ends inside "\xC3\xA9"
  EXPECT_FALSE(c.forcing());
  EXPECT_EQ(allowed(c), kAll);
  c.add(kTrail);
  EXPECT_TRUE(c.forcing());
  EXPECT_EQ(allowed(c), std::vector<int32_t>{kOk});
}

TEST(ReasoningBudget, ABudgetOfZeroForcesAtOnce) {
  ReasoningBudgetConstraint opened(spec(0, /*opened=*/true), bytes_of);
  EXPECT_TRUE(opened.forcing());
  EXPECT_EQ(opened.budgets_spent(), 1);
  ReasoningBudgetConstraint later(spec(0), bytes_of);
  later.add(kLt);
  later.add(kThink);
  EXPECT_TRUE(later.forcing());
  EXPECT_THROW(later.add(kA), Error);  // only the forced token may be committed
  // reset() goes back to the prompt's state.
  later.reset();
  EXPECT_FALSE(later.forcing());
  EXPECT_EQ(later.budgets_spent(), 0);
}

TEST(ReasoningBudget, VerifyRowsAndDraftsSeeTheStateAfterTheirDrafts) {
  ReasoningBudgetConstraint c(spec(2, /*opened=*/true), bytes_of);
  // Row after drafts "a a": forcing; after "a": not yet.
  EXPECT_EQ(allowed(c, {kA}), kAll);
  EXPECT_EQ(allowed(c, {kA, kA}), std::vector<int32_t>{kOk});
  EXPECT_EQ(allowed(c, {kA, kA, kOk}), std::vector<int32_t>{kDot});
  EXPECT_EQ(allowed(c, {kA, kA, kOk, kDot, kClose}), kAll);
  // A lookup draft is cut where the forcing refuses a token.
  const std::vector<int32_t> draft = {kA, kA, kOk, kA, kDot};
  EXPECT_EQ(c.allowed_prefix(draft), 3);
  EXPECT_EQ(c.allowed_prefix(std::vector<int32_t>{kA, kA, kOk, kDot, kClose, kA}), 6);
  // A row past a draft the forcing refuses allows nothing.
  std::vector<float> row(kVocab, 1.0f);
  EXPECT_FALSE(c.apply(row, std::vector<int32_t>{kA, kA, kA}, {}, false));
  // A draft's subset row: ids name the tokens; without the forced one nothing is allowed.
  std::vector<float> sub = {0.5f, 2.0f, -INFINITY};
  EXPECT_TRUE(
      c.apply(sub, std::vector<int32_t>{kA, kA}, std::vector<int32_t>{kA, kDot, kOk}, true));
  EXPECT_TRUE(std::isinf(sub[0]) && std::isinf(sub[1]));
  EXPECT_EQ(sub[2], 0.0f);  // forced even where a bias had masked it
  std::vector<float> missing = {0.5f, 2.0f};
  EXPECT_FALSE(
      c.apply(missing, std::vector<int32_t>{kA, kA}, std::vector<int32_t>{kA, kDot}, false));
}

// A rule that allows only even tokens, to chain with the budget.
struct EvenOnly : TokenConstraint {
  void reset() override {}
  void add(int32_t) override {}
  bool apply(std::span<float> logits, std::span<const int32_t>, std::span<const int32_t>,
             bool) override {
    bool any = false;
    for (size_t t = 0; t < logits.size(); ++t) {
      if (t % 2 == 1) logits[t] = -INFINITY;
      any = any || std::isfinite(logits[t]);
    }
    return any;
  }
  int32_t allowed_prefix(std::span<const int32_t> tokens) override {
    int32_t n = 0;
    while (n < static_cast<int32_t>(tokens.size()) && tokens[static_cast<size_t>(n)] % 2 == 0) ++n;
    return n;
  }
};

TEST(ReasoningBudget, ChainedWithAnotherRuleBothMustAllow) {
  ReasoningBudgetConstraint budget(spec(1, /*opened=*/true), bytes_of);
  EvenOnly even;
  ConstraintChain chain({&budget, &even});
  std::vector<float> row(kVocab, 1.0f);
  EXPECT_TRUE(chain.apply(row, {}, {}, false));
  EXPECT_TRUE(std::isfinite(row[kA]) && std::isinf(row[kLead]));
  EXPECT_EQ(chain.allowed_prefix(std::vector<int32_t>{kA, kA}), 1);  // the budget cuts at 1 ...
  EXPECT_EQ(chain.allowed_prefix(std::vector<int32_t>{kLead}), 0);   // ... the other rule at 0
  chain.add(kA);  // budget spent: "OK" (7, odd) is forced, which the other rule refuses
  std::vector<float> forced(kVocab, 1.0f);
  EXPECT_FALSE(chain.apply(forced, {}, {}, false));
}

}  // namespace
}  // namespace specdec
