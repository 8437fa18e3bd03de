#include "engine/prompt_scoring.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "speculative/fake_lm.h"

namespace specdec {
namespace {

std::vector<int32_t> prompt_of(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 5 + 3) % 17);
  return p;
}

TEST(PromptScoring, EachEntryIsTheNextTokensLogprobGivenEverythingBeforeIt) {
  testing::FakeLM lm(17, 11, 3.0f);
  const std::vector<int32_t> prompt = prompt_of(9);
  const std::vector<TokenLogprob> got = score_prompt(lm, prompt, 4, 3);
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    const std::vector<float> logits = lm.logits_for(std::span<const int32_t>(prompt).first(i + 1));
    const TokenLogprob want = token_logprob(logits, prompt[i + 1], 4);
    EXPECT_EQ(got[i].token, prompt[i + 1]);
    EXPECT_EQ(got[i].logprob, want.logprob) << i;
    EXPECT_EQ(got[i].top, want.top) << i;
    EXPECT_LT(got[i].logprob, 0.0f);
  }
  // The last prompt token is left for the decoder, as after a prefill.
  EXPECT_EQ(lm.length(), static_cast<int32_t>(prompt.size()) - 1);
}

TEST(PromptScoring, ChunkSizeChangesNothing) {
  const std::vector<int32_t> prompt = prompt_of(13);
  testing::FakeLM one(17, 5, 2.0f);
  const std::vector<TokenLogprob> base = score_prompt(one, prompt, 2, 1);
  for (int32_t chunk : {2, 5, 12, 64}) {
    testing::FakeLM lm(17, 5, 2.0f);
    const std::vector<TokenLogprob> got = score_prompt(lm, prompt, 2, chunk);
    ASSERT_EQ(got.size(), base.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].logprob, base[i].logprob) << chunk << " " << i;
      EXPECT_EQ(got[i].top, base[i].top) << chunk << " " << i;
    }
  }
}

// Whatever the cache held before (another request's tokens) does not condition the scores.
TEST(PromptScoring, AStaleCacheIsDroppedFirst) {
  const std::vector<int32_t> prompt = prompt_of(6);
  testing::FakeLM clean(17, 9, 2.0f);
  const std::vector<TokenLogprob> want = score_prompt(clean, prompt, 0, 4);
  testing::FakeLM stale(17, 9, 2.0f);
  std::vector<float> ignored;
  const std::vector<int32_t> other = {1, 2, 3, 4};
  stale.forward(other, ignored);
  const std::vector<TokenLogprob> got = score_prompt(stale, prompt, 0, 4);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].logprob, want[i].logprob) << i;
  EXPECT_TRUE(got[0].top.empty());
}

// Rows before `first` are read (their K/V condition the rest) but not scored.
TEST(PromptScoring, RowsBeforeFirstAreReadButNotScored) {
  const std::vector<int32_t> prompt = prompt_of(11);
  testing::FakeLM all_lm(17, 3, 2.0f);
  const std::vector<TokenLogprob> all = score_prompt(all_lm, prompt, 1, 4);
  for (int32_t first : {1, 4, 9, 10}) {
    testing::FakeLM lm(17, 3, 2.0f);
    const std::vector<TokenLogprob> got = score_prompt(lm, prompt, 1, 4, first);
    ASSERT_EQ(got.size(), all.size() - static_cast<size_t>(first)) << first;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].token, all[first + i].token);
      EXPECT_EQ(got[i].logprob, all[first + i].logprob) << first << " " << i;
      EXPECT_EQ(got[i].top, all[first + i].top) << first << " " << i;
    }
    EXPECT_EQ(lm.length(), 10);
  }
  testing::FakeLM lm(17, 3, 2.0f);
  EXPECT_THROW(score_prompt(lm, prompt, 0, 4, 11), Error);
  EXPECT_THROW(score_prompt(lm, prompt, 0, 4, -1), Error);
}

TEST(PromptScoring, AOneTokenPromptHasNothingToScoreAndReadsNothing) {
  testing::FakeLM lm(17, 1, 1.0f);
  const std::vector<int32_t> prompt = {4};
  EXPECT_TRUE(score_prompt(lm, prompt, 3, 8).empty());
  EXPECT_EQ(lm.length(), 0);
}

TEST(PromptScoring, BadArgumentsThrow) {
  testing::FakeLM lm(17, 1, 1.0f);
  const std::vector<int32_t> prompt = {1, 2, 3};
  EXPECT_THROW(score_prompt(lm, {}, 0, 8), Error);
  EXPECT_THROW(score_prompt(lm, prompt, -1, 8), Error);
  EXPECT_THROW(score_prompt(lm, prompt, kMaxTopLogprobs + 1, 8), Error);
  EXPECT_THROW(score_prompt(lm, prompt, 0, 0), Error);
  const std::vector<int32_t> outside = {1, 17};
  EXPECT_THROW(score_prompt(lm, outside, 0, 8), Error);
}

}  // namespace
}  // namespace specdec
