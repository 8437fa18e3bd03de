#include "sampling/dry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/penalties.h"
#include "sampling/rng.h"

namespace specdec {
namespace {

DryParams dry(float multiplier, float base, int32_t allowed) {
  DryParams p;
  p.multiplier = multiplier;
  p.base = base;
  p.allowed_length = allowed;
  return p;
}

std::map<int32_t, float> penalties_of(const DryParams& p, const std::vector<DryBreaker>& breakers,
                                      const std::vector<int32_t>& window) {
  std::vector<std::pair<int32_t, float>> out{{99, 1.0f}};  // replaced, not appended to
  dry_penalties(p, breakers, window, out);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
  return {out.begin(), out.end()};
}

// llama.cpp's own example: in "a b c c b c y a b c" the end "a b c" also ends at the first c
// (3 tokens), "c" at the second (1), "b c" at the third c (2); the tokens after those runs, c, b
// and y, would extend them.
TEST(Dry, PenalizesTheTokensThatWouldExtendARepeatOfTheEnd) {
  const std::vector<int32_t> w{1, 2, 3, 3, 2, 3, 4, 1, 2, 3};
  // allowed 2: c (run 3) gets 0.8 * 1.75, y (run 2) 0.8; b's run of 1 is allowed.
  EXPECT_EQ(penalties_of(dry(0.8f, 1.75f, 2), {}, w),
            (std::map<int32_t, float>{{3, 0.8f * 1.75f}, {4, 0.8f}}));
  // allowed 1: b too, and every run's exponent grows by one.
  const auto p1 = penalties_of(dry(1.0f, 2.0f, 1), {}, w);
  EXPECT_EQ(p1, (std::map<int32_t, float>{{2, 1.0f}, {3, 4.0f}, {4, 2.0f}}));
  // Off: multiplier 0, base below 1, no window; and a window no longer than allowed_length.
  EXPECT_TRUE(penalties_of(dry(0.0f, 1.75f, 2), {}, w).empty());
  EXPECT_TRUE(penalties_of(dry(1.0f, 0.5f, 2), {}, w).empty());
  DryParams none = dry(1.0f, 1.75f, 2);
  none.penalty_last_n = 0;
  EXPECT_TRUE(penalties_of(none, {}, w).empty());
  EXPECT_TRUE(penalties_of(dry(1.0f, 1.75f, 2), {}, {1, 1}).empty());
}

TEST(Dry, ABreakerCapsHowFarBackARepeatReaches) {
  // "8 9 1 2" repeats: without breakers the token after it (5) has a run of 4.
  const std::vector<int32_t> w{7, 8, 9, 1, 2, 5, 8, 9, 1, 2};
  const DryParams p = dry(1.0f, 2.0f, 2);
  EXPECT_EQ(penalties_of(p, {}, w).at(5), 4.0f);
  // "8" then "9" as a two-token breaker: only the 2 tokens after it count.
  EXPECT_EQ(penalties_of(p, {{8, {9}}}, w).at(5), 1.0f);
  // A tail that does not follow the head breaks nothing.
  EXPECT_EQ(penalties_of(p, {{8, {4}}}, w).at(5), 4.0f);
  // A one-token breaker: 9 alone leaves a run of 2 as well.
  EXPECT_EQ(penalties_of(p, {{9, {}}}, w).at(5), 1.0f);
  // With the breaker as the last token nothing can repeat (rep_limit 0 < allowed_length).
  EXPECT_TRUE(penalties_of(p, {{2, {}}}, w).empty());
  // A token that is a breaker by itself is never penalized.
  EXPECT_EQ(penalties_of(p, {{5, {}}}, w).count(5), 0u);
}

TEST(Dry, TheExponentIsClampedSoThePenaltyStaysFinite) {
  std::vector<int32_t> w;
  for (int i = 0; i < 600; ++i) w.push_back(i % 2);  // ends in 1; a run of 598 before the last 0
  const auto p = penalties_of(dry(1.0f, 1.75f, 2), {}, w);
  ASSERT_EQ(p.size(), 1u);
  // 1.75^596 overflows a float; the exponent stops at 88.72 / ln 1.75 = 158.
  EXPECT_TRUE(std::isfinite(p.at(0)));
  EXPECT_FLOAT_EQ(p.at(0), static_cast<float>(std::pow(1.75, 158)));
}

// The rule written out naively: for every earlier end position, compare backwards token by token.
std::map<int32_t, float> brute_force(const DryParams& p, const std::vector<DryBreaker>& breakers,
                                     const std::vector<int32_t>& w) {
  std::map<int32_t, float> out;
  const int m = static_cast<int>(w.size());
  if (m <= p.allowed_length) return out;
  int limit = m;
  for (int i = 0; i < m && limit == m; ++i) {  // i tokens from the end
    int best = -1;
    for (const DryBreaker& b : breakers) {
      const int len = static_cast<int>(b.tail.size());
      if (b.head != w[size_t(m - 1 - i)] || len > i || len <= best) continue;
      bool ok = true;
      for (int k = 0; k < len; ++k) ok = ok && b.tail[size_t(k)] == w[size_t(m - i + k)];
      if (ok) best = len;
    }
    if (best >= 0) limit = i - best;
  }
  if (limit < p.allowed_length) return out;
  std::map<int32_t, int> longest;
  for (int j = 0; j + 1 < m; ++j) {
    int run = 0;
    while (run <= j && w[size_t(j - run)] == w[size_t(m - 1 - run)]) ++run;
    run = std::min(run, limit);
    if (run >= p.allowed_length) {
      int& l = longest[w[size_t(j + 1)]];
      l = std::max(l, run);
    }
  }
  for (const auto& [t, run] : longest) {
    bool single = false;
    for (const DryBreaker& b : breakers) single = single || (b.head == t && b.tail.empty());
    if (!single) {
      out[t] = static_cast<float>(p.multiplier * std::pow(double(p.base), run - p.allowed_length));
    }
  }
  return out;
}

TEST(Dry, MatchesTheNaiveRuleOnRandomWindows) {
  Rng rng(41);
  for (int trial = 0; trial < 400; ++trial) {
    const int alphabet = 2 + trial % 5;
    std::vector<int32_t> w(static_cast<size_t>(1 + rng.uniform() * 80));
    for (int32_t& t : w) t = static_cast<int32_t>(rng.uniform() * alphabet);
    std::vector<DryBreaker> breakers;
    if (trial % 3 != 0) breakers.push_back({static_cast<int32_t>(rng.uniform() * alphabet), {}});
    if (trial % 4 == 1) {
      breakers.push_back({static_cast<int32_t>(rng.uniform() * alphabet),
                          {static_cast<int32_t>(rng.uniform() * alphabet)}});
    }
    std::sort(breakers.begin(), breakers.end());  // dry_penalties' precondition
    const DryParams p = dry(0.5f + float(trial % 3), 1.5f, trial % 4);
    ASSERT_EQ(penalties_of(p, breakers, w), brute_force(p, breakers, w)) << "trial " << trial;
  }
}

TEST(Dry, BreakersOfAVocabularyAreItsTokensThatHoldOrBeginThem) {
  const std::vector<std::string> vocab{"a", "b:", "\n", ":x", "c", "x\n", "\n\n"};
  const auto text = [&](int32_t id) { return vocab[size_t(id)]; };
  // A toy tokenizer: each byte is the token of that one-byte text.
  const auto tokenize = [&](const std::string& s) {
    std::vector<int32_t> ids;
    for (char ch : s) {
      const auto it = std::find(vocab.begin(), vocab.end(), std::string(1, ch));
      ids.push_back(static_cast<int32_t>(it - vocab.begin()));
    }
    return ids;
  };
  const auto colon = dry_breakers({":"}, 7, text, tokenize);
  EXPECT_EQ(colon, (std::vector<DryBreaker>{{1, {}}, {3, {}}}));
  // "\n\n": the token that holds it, and "\n" or "x\n" followed by "\n".
  const auto blank = dry_breakers({"\n\n"}, 7, text, tokenize);
  EXPECT_EQ(blank, (std::vector<DryBreaker>{{2, {2}}, {5, {2}}, {6, {}}}));
  // Empty breakers are skipped; the same breaker twice is listed once.
  EXPECT_EQ(dry_breakers({"", ":", ":"}, 7, text, tokenize), colon);
}

TEST(Dry, ValuesOutsideTheirRangesAreRefused) {
  EXPECT_NO_THROW(check_dry_params(DryParams{}));
  DryParams p;
  p.multiplier = -1.0f;
  EXPECT_THROW(check_dry_params(p), Error);
  p = DryParams{};
  p.base = std::nanf("");
  EXPECT_THROW(check_dry_params(p), Error);
  p = DryParams{};
  p.allowed_length = -1;
  EXPECT_THROW(check_dry_params(p), Error);
  p = DryParams{};
  p.penalty_last_n = -2;
  EXPECT_THROW(check_dry_params(p), Error);
}

// Through TokenPenalties: a row with drafts counted as `extra` gets exactly the penalty the same
// text gets once added, on a full row and on a subset of its columns; and the window is the last
// penalty_last_n tokens of the prompt and the text.
TEST(Dry, TokenPenaltiesCountThePromptTheTextAndARoundsDrafts) {
  PenaltyParams pp;
  pp.dry = dry(1.0f, 2.0f, 1);
  pp.dry_breakers = {{5, {}}};
  const std::vector<int32_t> prompt{1, 2, 3, 1, 2};
  const std::vector<int32_t> text{3, 4, 1, 2};
  TokenPenalties all(pp, 8), part(pp, 8);
  all.reset(prompt);
  part.reset(prompt);
  for (int32_t t : text) all.add(t);
  part.add(text[0]);
  const std::vector<float> base{0.5f, 1.0f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f, 0.25f};
  std::vector<float> a = base, b = base;
  all.apply(a, {});
  part.apply(b, std::span<const int32_t>(text).subspan(1));
  EXPECT_EQ(a, b);
  // "1 2" ends the text and occurred twice before, followed by 3 each time (the token before
  // differs: 3 against 4, so the run is 2): 3 loses 2^(2-1); nothing else repeats.
  EXPECT_FLOAT_EQ(a[3], base[3] - 2.0f);
  for (size_t t = 0; t < base.size(); ++t) {
    if (t != 3) {
      EXPECT_EQ(a[t], base[t]) << t;
    }
  }
  EXPECT_NE(a, base);
  const std::vector<int32_t> ids{7, 3, 0};
  std::vector<float> sub{base[7], base[3], base[0]};
  part.apply(sub, std::span<const int32_t>(text).subspan(1), ids);
  EXPECT_EQ(sub, (std::vector<float>{a[7], a[3], a[0]}));
  // A window of the last 3 tokens ("4 1 2") holds no repeat.
  pp.dry.penalty_last_n = 3;
  TokenPenalties window(pp, 8);
  window.reset(prompt);
  for (int32_t t : text) window.add(t);
  std::vector<float> c = base;
  window.apply(c, {});
  EXPECT_EQ(c, base);
}

}  // namespace
}  // namespace specdec
