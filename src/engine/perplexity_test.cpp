#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "sampling/logprobs.h"
#include "speculative/fake_lm.h"

namespace specdec {
namespace {

std::vector<int32_t> text_of(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 7 + i / 5) % 13);
  return t;
}

// The definition, written out: windows of n_ctx, the second half of each scored, every window
// conditioned only on itself (its first token BOS when given).
double reference_ppl(const testing::FakeLM& lm, const std::vector<int32_t>& text, int32_t n_ctx,
                     int32_t chunks, int32_t bos, double* error) {
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  for (int32_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> w(text.begin() + c * n_ctx, text.begin() + (c + 1) * n_ctx);
    if (bos >= 0) w[0] = bos;
    for (int32_t j = n_ctx / 2; j < n_ctx - 1; ++j) {
      const std::vector<float> logits = lm.logits_for(std::span<const int32_t>(w).first(j + 1));
      const double lp = token_logprob(logits, w[static_cast<size_t>(j) + 1], 0).logprob;
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
  }
  const double mean = nll / static_cast<double>(count);
  *error = std::sqrt((nll2 / static_cast<double>(count) - mean * mean) /
                     static_cast<double>(count - 1)) *
           std::exp(mean);
  return std::exp(mean);
}

TEST(Perplexity, MatchesTheDefinitionWindowByWindow) {
  const std::vector<int32_t> text = text_of(70);  // 4 windows of 16, 6 tokens left over
  for (int32_t bos : {-1, 12}) {
    testing::FakeLM lm(13, 21, 2.5f, 16);
    PerplexityOptions o;
    o.n_ctx = 16;
    o.bos = bos;
    o.batch = 3;
    std::vector<double> running;
    const PerplexityResult r = perplexity(lm, text, o, [&](int32_t c, double ppl) {
      EXPECT_EQ(c, static_cast<int32_t>(running.size()));
      running.push_back(ppl);
    });
    double error = 0;
    const double want = reference_ppl(lm, text, 16, 4, bos, &error);
    EXPECT_EQ(r.chunks, 4);
    EXPECT_EQ(r.scored, 4 * 7);
    EXPECT_NEAR(r.ppl, want, 1e-9 * want) << bos;
    EXPECT_NEAR(r.ppl_error, error, 1e-6 * error) << bos;
    EXPECT_GT(r.ppl_error, 0);
    ASSERT_EQ(running.size(), 4u);
    EXPECT_DOUBLE_EQ(running.back(), r.ppl);
    // The first window alone is the first running value.
    double e1 = 0;
    EXPECT_NEAR(running[0], reference_ppl(lm, text, 16, 1, bos, &e1), 1e-9 * running[0]);
  }
}

TEST(Perplexity, ChunksLimitTheWindowsScored) {
  testing::FakeLM lm(13, 21, 2.5f, 16);
  PerplexityOptions o;
  o.n_ctx = 16;
  o.max_chunks = 2;
  const PerplexityResult r = perplexity(lm, text_of(70), o);
  double error = 0;
  EXPECT_EQ(r.chunks, 2);
  EXPECT_NEAR(r.ppl, reference_ppl(lm, text_of(70), 16, 2, -1, &error), 1e-9 * r.ppl);
}

TEST(Perplexity, BadInputsThrow) {
  testing::FakeLM lm(13, 21, 2.5f, 16);
  PerplexityOptions o;
  o.n_ctx = 16;
  EXPECT_THROW(perplexity(lm, text_of(15), o), Error);  // not one window
  o.n_ctx = 32;
  EXPECT_THROW(perplexity(lm, text_of(70), o), Error);  // larger than the cache
  o.n_ctx = 3;
  EXPECT_THROW(perplexity(lm, text_of(70), o), Error);
  o.n_ctx = 16;
  o.bos = 13;
  EXPECT_THROW(perplexity(lm, text_of(70), o), Error);
  o.bos = -1;
  o.batch = 0;
  EXPECT_THROW(perplexity(lm, text_of(70), o), Error);
}

}  // namespace
}  // namespace specdec
