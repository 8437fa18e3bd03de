#include "sampling/penalties.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

namespace specdec {
namespace {

std::vector<float> ramp(int32_t n) {  // logits -2, -1.5, ..., distinct, both signs
  std::vector<float> l(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) l[static_cast<size_t>(i)] = -2.0f + 0.5f * static_cast<float>(i);
  return l;
}

TEST(TokenPenalties, FrequencyAndPresenceCountGeneratedTokensOnly) {
  PenaltyParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  TokenPenalties pen(p, 10);
  const std::vector<int32_t> prompt = {1, 2};
  pen.reset(prompt);
  pen.add(3);
  pen.add(3);
  pen.add(4);
  std::vector<float> l = ramp(10);
  const std::vector<float> raw = l;
  pen.apply(l, {});
  EXPECT_EQ(l[1], raw[1]);  // the prompt does not count for these two
  EXPECT_EQ(l[2], raw[2]);
  EXPECT_FLOAT_EQ(l[3], raw[3] - 2 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[4], raw[4] - 0.5f - 0.25f);
  for (int32_t t : {0, 5, 6, 7, 8, 9})
    EXPECT_EQ(l[static_cast<size_t>(t)], raw[static_cast<size_t>(t)]);
}

TEST(TokenPenalties, RepetitionDividesPositiveAndMultipliesNegativeLogitsOfPromptAndOutput) {
  PenaltyParams p;
  p.repetition_penalty = 2.0f;
  TokenPenalties pen(p, 10);
  const std::vector<int32_t> prompt = {0, 9};
  pen.reset(prompt);
  pen.add(6);
  std::vector<float> l = ramp(10);  // l[0] = -2, l[6] = 1, l[9] = 2.5
  pen.apply(l, {});
  EXPECT_FLOAT_EQ(l[0], -4.0f);
  EXPECT_FLOAT_EQ(l[6], 0.5f);
  EXPECT_FLOAT_EQ(l[9], 1.25f);
  EXPECT_FLOAT_EQ(l[5], 0.5f);  // untouched
  // Only once per token, however often it occurred.
  pen.add(6);
  std::vector<float> again = ramp(10);
  pen.apply(again, {});
  EXPECT_FLOAT_EQ(again[6], 0.5f);
}

// llama.cpp's rule (its repeat_last_n): all three penalties count the last N tokens of the prompt
// and the text together, a round's drafts included.
TEST(TokenPenalties, AWindowCountsTheLastTokensOfPromptAndTextForAllThree) {
  PenaltyParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{0, 1.0f}, {7, -1.0f}};
  p.last_n = 4;
  TokenPenalties pen(p, 10);
  const std::vector<int32_t> prompt = {1, 2, 7, 3};
  pen.reset(prompt);
  pen.add(3);
  pen.add(5);
  // Window: 7 3 3 5 (1 and 2 fell out).
  const std::vector<float> raw = ramp(10);  // l[t] = -2 + t/2
  const auto penalized = [&](size_t t, int count, float bias = 0.0f) {
    float l = raw[t] + bias;
    l = l > 0 ? l / 2.0f : l * 2.0f;
    return l - 0.5f * static_cast<float>(count) - 0.25f;
  };
  std::vector<float> l = raw;
  pen.apply(l, {});
  EXPECT_EQ(l[1], raw[1]);
  EXPECT_EQ(l[2], raw[2]);
  EXPECT_FLOAT_EQ(l[3], penalized(3, 2));
  EXPECT_FLOAT_EQ(l[5], penalized(5, 1));
  EXPECT_FLOAT_EQ(l[7], penalized(7, 1, -1.0f));  // the prompt counts, after its bias
  EXPECT_FLOAT_EQ(l[0], raw[0] + 1.0f);           // bias alone outside the window
  for (size_t t : {4u, 6u, 8u, 9u}) EXPECT_EQ(l[t], raw[t]);
  // Two drafts push 7 and one 3 out: window 3 5 2 2.
  std::vector<float> d = raw;
  const std::vector<int32_t> drafts = {2, 2};
  pen.apply(d, drafts);
  EXPECT_FLOAT_EQ(d[2], penalized(2, 2));
  EXPECT_FLOAT_EQ(d[3], penalized(3, 1));
  EXPECT_FLOAT_EQ(d[7], raw[7] - 1.0f);
  // A vocabulary subset's columns get the same values.
  const std::vector<int32_t> ids = {7, 2, 0, 3, 9};
  std::vector<float> sub = {raw[7], raw[2], raw[0], raw[3], raw[9]};
  pen.apply(sub, drafts, ids);
  for (size_t j = 0; j < ids.size(); ++j) EXPECT_EQ(sub[j], d[static_cast<size_t>(ids[j])]) << j;
  // A bad column is refused and leaves no count behind for the next row.
  const std::vector<int32_t> bad_ids = {3, 12};
  std::vector<float> bad = {raw[3], raw[2]};
  EXPECT_THROW(pen.apply(bad, drafts, bad_ids), Error);
  std::vector<float> again = raw;
  pen.apply(again, drafts);
  EXPECT_EQ(again, d);
  // The window covering everything, and a window of 0 (the three off, the bias kept).
  p.last_n = PenaltyParams::kWholeText;
  TokenPenalties whole(p, 10);
  whole.reset(prompt);
  std::vector<float> w = raw;
  whole.apply(w, {});
  EXPECT_FLOAT_EQ(w[1], penalized(1, 1));
  p.last_n = 0;
  TokenPenalties off(p, 10);
  off.reset(prompt);
  off.add(3);
  std::vector<float> o = raw;
  off.apply(o, {});
  EXPECT_EQ(o[3], raw[3]);
  EXPECT_FLOAT_EQ(o[7], raw[7] - 1.0f);
  p.last_n = -2;
  EXPECT_THROW(TokenPenalties(p, 10), Error);
}

TEST(TokenPenalties, LogitBiasIsAddedAndSurvivesReset) {
  PenaltyParams p;
  p.logit_bias = {{2, -100.0f}, {7, 3.0f}, {2, -50.0f}};  // the last value of a token wins
  TokenPenalties pen(p, 8);
  pen.reset(std::vector<int32_t>{1, 2, 3});
  std::vector<float> l = ramp(8);
  const std::vector<float> raw = l;
  pen.apply(l, {});
  EXPECT_FLOAT_EQ(l[2], raw[2] - 50.0f);
  EXPECT_FLOAT_EQ(l[7], raw[7] + 3.0f);
  EXPECT_EQ(l[1], raw[1]);
}

TEST(TokenPenalties, DraftsCountAsGeneratedExactlyLikeAddedTokens) {
  PenaltyParams p;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = -0.2f;
  p.logit_bias = {{5, 1.5f}};
  const std::vector<int32_t> prompt = {4, 8, 8};
  const std::vector<int32_t> gen = {1, 8, 1};
  const std::vector<int32_t> drafts = {3, 1, 3, 11};
  TokenPenalties via_extra(p, 12), via_add(p, 12);
  via_extra.reset(prompt);
  via_add.reset(prompt);
  for (int32_t t : gen) {
    via_extra.add(t);
    via_add.add(t);
  }
  for (int32_t t : drafts) via_add.add(t);
  std::vector<float> a = ramp(12), b = ramp(12);
  via_extra.apply(a, drafts);
  via_add.apply(b, {});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << i;  // same bits
  // And the subset form gives each listed column what the full row gives its token.
  const std::vector<int32_t> subset = {11, 3, 0, 5, 8, 2};
  std::vector<float> cols;
  const std::vector<float> r = ramp(12);
  for (int32_t t : subset) cols.push_back(r[static_cast<size_t>(t)]);
  via_extra.apply(cols, drafts, subset);
  for (size_t j = 0; j < subset.size(); ++j) {
    EXPECT_EQ(cols[j], b[static_cast<size_t>(subset[j])]) << subset[j];
  }
}

// min_tokens: the held-back tokens get -inf while fewer than min_tokens were generated, a row's
// drafts before it counting; other tokens keep their adjustments; reset starts the count again.
TEST(TokenPenalties, MinTokensHoldsBackEndingTokensUntilEnoughWereGenerated) {
  PenaltyParams p;
  p.min_tokens = 3;
  p.min_tokens_ids = {0, 7};
  p.logit_bias = {{7, 2.0f}, {2, 1.0f}};
  TokenPenalties pen(p, 10);
  pen.reset(std::vector<int32_t>{5});
  const std::vector<float> raw = ramp(10);
  const auto row = [&](std::span<const int32_t> extra) {
    std::vector<float> l = raw;
    pen.apply(l, extra);
    return l;
  };
  std::vector<float> l = row({});
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);
  EXPECT_TRUE(std::isinf(l[7]) && l[7] < 0);
  EXPECT_EQ(l[2], raw[2] + 1.0f);
  EXPECT_EQ(l[5], raw[5]);
  pen.add(4);
  EXPECT_TRUE(std::isinf(row(std::vector<int32_t>{3})[7]));  // 1 generated + 1 drafted < 3
  const std::vector<float> free_row = row(std::vector<int32_t>{3, 3});  // 1 + 2 = 3: allowed
  EXPECT_EQ(free_row[0], raw[0]);
  EXPECT_EQ(free_row[7], raw[7] + 2.0f);
  // The subset form holds back the same columns.
  const std::vector<int32_t> subset = {7, 1, 0};
  std::vector<float> cols = {raw[7], raw[1], raw[0]};
  pen.apply(cols, {}, subset);
  EXPECT_TRUE(std::isinf(cols[0]) && std::isinf(cols[2]));
  EXPECT_EQ(cols[1], raw[1]);
  pen.add(4);
  pen.add(4);
  EXPECT_EQ(row({})[0], raw[0]);
  pen.reset(std::vector<int32_t>{5});
  EXPECT_TRUE(std::isinf(row({})[0]));
  // Without ids to hold back, min_tokens alone changes nothing.
  PenaltyParams none;
  none.min_tokens = 5;
  EXPECT_FALSE(none.active());
}

TEST(TokenPenalties, ResetForgetsTheLastSequence) {
  PenaltyParams p;
  p.frequency_penalty = 1.0f;
  p.repetition_penalty = 1.5f;
  TokenPenalties pen(p, 6);
  pen.reset(std::vector<int32_t>{0});
  pen.add(3);
  pen.reset(std::vector<int32_t>{1});
  std::vector<float> l = ramp(6);
  const std::vector<float> raw = l;
  pen.apply(l, {});
  EXPECT_EQ(l[0], raw[0]);
  EXPECT_EQ(l[3], raw[3]);
  EXPECT_NE(l[1], raw[1]);
}

TEST(TokenPenalties, InactiveParamsLeaveTheRowAlone) {
  TokenPenalties pen(PenaltyParams{}, 4);
  pen.add(1);
  std::vector<float> l = ramp(4);
  const std::vector<float> raw = l;
  pen.apply(l, std::vector<int32_t>{2});
  EXPECT_EQ(l, raw);
}

TEST(TokenPenalties, OutOfRangeParametersAndTokensAreErrors) {
  const auto bad = [](auto set) {
    PenaltyParams p;
    set(p);
    EXPECT_THROW(TokenPenalties(p, 10), Error);
  };
  bad([](PenaltyParams& p) { p.repetition_penalty = 0.0f; });
  bad([](PenaltyParams& p) { p.repetition_penalty = 11.0f; });
  bad([](PenaltyParams& p) { p.presence_penalty = 2.5f; });
  bad([](PenaltyParams& p) { p.frequency_penalty = -2.1f; });
  bad([](PenaltyParams& p) { p.frequency_penalty = std::nanf(""); });
  bad([](PenaltyParams& p) { p.logit_bias = {{10, 1.0f}}; });
  bad([](PenaltyParams& p) { p.logit_bias = {{-1, 1.0f}}; });
  bad([](PenaltyParams& p) { p.logit_bias = {{3, 101.0f}}; });
  bad([](PenaltyParams& p) { p.min_tokens = -1; });
  bad([](PenaltyParams& p) { p.min_tokens_ids = {10}; });
  PenaltyParams p;
  p.frequency_penalty = 1.0f;
  TokenPenalties pen(p, 10);
  EXPECT_THROW(pen.add(10), Error);
  std::vector<float> short_row(9);
  EXPECT_THROW(pen.apply(short_row, {}), Error);
  std::vector<float> row(10);
  EXPECT_THROW(pen.apply(row, std::vector<int32_t>{12}), Error);
}

}  // namespace
}  // namespace specdec
