#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"

namespace specdec {
namespace {

TEST(TokenLogprob, IsTheLogSoftmaxOfTheLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  double z = 0;
  for (float l : logits) z += std::exp(l);
  const TokenLogprob lp = token_logprob(logits, 2, 3);
  EXPECT_EQ(lp.token, 2);
  EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  // Most likely first; the tie between ids 1 and 3 goes to the smaller id.
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - std::log(z), 1e-6);
  EXPECT_FLOAT_EQ(lp.top[2].second, lp.logprob);
  // Rank: 1 + the tokens strictly more likely; tied tokens share a rank.
  EXPECT_EQ(lp.rank, 3);
  EXPECT_EQ(token_logprob(logits, 1, 0).rank, 1);
  EXPECT_EQ(token_logprob(logits, 3, 0).rank, 1);
  EXPECT_EQ(token_logprob(logits, 0, 0).rank, 4);
}

// The vectorized exps are std::exp's bit for bit and are summed in index order: the logprob is
// the written-out scalar formula's exactly, on a vocabulary the size of Qwen's.
TEST(TokenLogprob, EqualsTheScalarFormulaBitForBit) {
  std::vector<float> logits(151936);
  uint64_t h = 88172645463325252ULL;
  for (float& l : logits) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    l = static_cast<float>(static_cast<double>(h >> 11) * 0x1p-53 * 40.0 - 25.0);
  }
  float max = -INFINITY;
  for (float l : logits) max = std::max(max, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_z = static_cast<double>(max) + std::log(sum);
  for (int32_t t : {0, 17, 4096, 151935}) {
    const float want = static_cast<float>(logits[static_cast<size_t>(t)] - log_z);
    EXPECT_EQ(token_logprob(logits, t, 0).logprob, want) << t;
  }
  std::vector<float> with_nan = {0.0f, std::nanf(""), 1.0f};
  EXPECT_THROW(token_logprob(with_nan, 0, 0), Error);
}

TEST(TokenLogprob, ProbabilitiesSumToOneAndLargeLogitsDoNotOverflow) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 500.0f + static_cast<float>(i % 17);
  double total = 0;
  for (int32_t t = 0; t < 1000; ++t) total += std::exp(token_logprob(logits, t, 0).logprob);
  EXPECT_NEAR(total, 1.0, 1e-4);
  EXPECT_TRUE(token_logprob(logits, 0, 0).top.empty());
}

TEST(TokenLogprob, TopListIsCappedByTheVocabulary) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_EQ(token_logprob(logits, 0, 5).top.size(), 2u);
}

TEST(TokenLogprob, RefusesBadArguments) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_THROW(token_logprob(logits, 2, 0), Error);
  EXPECT_THROW(token_logprob(logits, -1, 0), Error);
  EXPECT_THROW(token_logprob(logits, 0, kMaxTopLogprobs + 1), Error);
  const std::vector<float> bad = {NAN, NAN};
  EXPECT_THROW(token_logprob(bad, 0, 0), Error);
}

TEST(SampledLogprob, IsTheSampledDistributionsEntry) {
  // 0.4, 0.3, 0.2, 0.1 at T 1; top-k 3 leaves 4/9, 3/9, 2/9.
  const std::vector<float> logits = {std::log(4.0f), std::log(3.0f), std::log(2.0f), 0.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  Distribution d;
  make_distribution(logits, sp, d);
  const TokenLogprob e = sampled_logprob(d, 1, 5);
  EXPECT_EQ(e.token, 1);
  EXPECT_NEAR(std::exp(e.logprob), 3.0 / 9, 1e-6);
  EXPECT_EQ(e.rank, 2);
  ASSERT_EQ(e.top.size(), 3u);  // the support is smaller than 5
  EXPECT_EQ(e.top[0].first, 0);
  EXPECT_NEAR(std::exp(e.top[0].second), 4.0 / 9, 1e-6);
  EXPECT_EQ(e.top[2].first, 2);
  EXPECT_EQ(sampled_logprob(d, 0, 1).top.size(), 1u);
  // Outside the support (cut by top-k) it has no probability to report.
  EXPECT_THROW(sampled_logprob(d, 3, 1), Error);
  EXPECT_THROW(sampled_logprob(d, 0, kMaxTopLogprobs + 1), Error);
  // Greedy: one-hot.
  sp.temperature = 0.0f;
  make_distribution(logits, sp, d);
  const TokenLogprob g = sampled_logprob(d, 0, 3);
  EXPECT_EQ(g.logprob, 0.0f);
  ASSERT_EQ(g.top.size(), 1u);
  EXPECT_EQ(g.top[0].first, 0);
}

}  // namespace
}  // namespace specdec
