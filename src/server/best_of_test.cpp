#include "server/best_of.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

namespace specdec::server {
namespace {

GenerationResult with_logprobs(std::vector<float> lps) {
  GenerationResult r;
  for (float lp : lps) {
    TokenLogprob t;
    t.token = 1;
    t.logprob = lp;
    r.logprobs.push_back(t);
  }
  return r;
}

TEST(BestOf, TheScoreIsTheMeanLogprobPerToken) {
  EXPECT_DOUBLE_EQ(mean_token_logprob(with_logprobs({-1.0f, -3.0f})), -2.0);
  EXPECT_TRUE(std::isinf(mean_token_logprob(GenerationResult{})));
}

TEST(BestOf, EachPromptKeepsItsNBestInOrder) {
  // Prompt 0: scores -2, -0.5, -1; prompt 1: -0.1 (one token), -0.1 (ties: earlier first), -9.
  // A long sequence is not penalized for its length: the mean, not the sum, decides.
  const std::vector<GenerationResult> results = {
      with_logprobs({-1.0f, -3.0f}), with_logprobs({-0.5f, -0.5f, -0.5f, -0.5f}),
      with_logprobs({-1.0f}),        with_logprobs({-0.1f}),
      with_logprobs({-0.1f, -0.1f}), with_logprobs({-9.0f})};
  EXPECT_EQ(best_of_choices(results, 3, 2), (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(best_of_choices(results, 3, 1), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(best_of_choices(results, 3, 3), (std::vector<size_t>{1, 2, 0, 3, 4, 5}));
  EXPECT_EQ(best_of_choices(results, 6, 1), (std::vector<size_t>{3}));
  EXPECT_THROW(best_of_choices(results, 4, 1), Error);  // 6 is not prompts of 4
  EXPECT_THROW(best_of_choices(results, 3, 4), Error);
}

}  // namespace
}  // namespace specdec::server
