// The per-token origin record (SpeculativeDecoder::origins) against the round counters: every
// generated token has exactly one origin, and the counts of each kind are the DecodeStats
// counters (accepted drafts, corrections, bonus tokens, target-only steps).
#include "speculative/token_origin.h"

#include <gtest/gtest.h>

#include <vector>

#include "speculative/fake_lm.h"
#include "speculative/ngram_drafter.h"
#include "speculative/speculative_decoder.h"

namespace specdec {
namespace {

using testing::FakeLM;

SamplingParams sampling(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// Origins per round follow the round log: a target-only step is one Target token; a round is
// its committed accepted drafts, then its Correction (some draft rejected) or Bonus (none).
void expect_origins_follow_the_log(const SpeculativeDecoder& dec) {
  const std::span<const TokenOrigin> origins = dec.origins();
  ASSERT_EQ(origins.size(), dec.generated().size());
  size_t at = 0;
  for (const RoundLog& log : dec.stats().log) {
    ASSERT_LE(at + static_cast<size_t>(log.emitted), origins.size());
    for (int32_t i = 0; i < log.emitted; ++i, ++at) {
      TokenOrigin want = TokenOrigin::Target;
      if (log.gamma > 0) {
        want = i < log.accepted
                   ? TokenOrigin::Draft
                   : (log.accepted == log.gamma ? TokenOrigin::Bonus : TokenOrigin::Correction);
      }
      ASSERT_EQ(origins[at], want) << "token " << at;
    }
  }
  EXPECT_EQ(at, origins.size());
}

// With no stop token cutting a round, each kind's count is exactly its DecodeStats counter.
void expect_counts_match_stats(const SpeculativeDecoder& dec) {
  const DecodeStats& s = dec.stats();
  const OriginCounts c = count_origins(dec.origins());
  EXPECT_EQ(c.total(), static_cast<int64_t>(dec.generated().size()));
  EXPECT_EQ(c.total(), s.emitted);
  EXPECT_EQ(c.target, s.baseline_steps);
  EXPECT_EQ(c.draft, s.accepted);
  EXPECT_EQ(c.correction, s.corrections);
  EXPECT_EQ(c.bonus, s.bonus);
  EXPECT_EQ(s.corrections + s.bonus, s.rounds);  // every round commits its target token
}

TEST(TokenOrigin, NamesAndCounts) {
  EXPECT_STREQ(token_origin_name(TokenOrigin::Target), "target");
  EXPECT_STREQ(token_origin_name(TokenOrigin::Draft), "draft");
  EXPECT_STREQ(token_origin_name(TokenOrigin::Correction), "correction");
  EXPECT_STREQ(token_origin_name(TokenOrigin::Bonus), "bonus");
  const std::vector<TokenOrigin> v{TokenOrigin::Draft,      TokenOrigin::Draft,
                                   TokenOrigin::Bonus,      TokenOrigin::Target,
                                   TokenOrigin::Correction, TokenOrigin::Draft};
  const OriginCounts c = count_origins(v);
  EXPECT_EQ(c.draft, 3);
  EXPECT_EQ(c.bonus, 1);
  EXPECT_EQ(c.target, 1);
  EXPECT_EQ(c.correction, 1);
  EXPECT_EQ(c.total(), 6);
  EXPECT_EQ(c.of(TokenOrigin::Draft), 3);
  EXPECT_EQ(c.of(TokenOrigin::Bonus), 1);
}

TEST(TokenOrigin, DraftModelRunsMatchTheRoundCounters) {
  for (float temp : {0.0f, 1.0f}) {
    for (int gamma : {1, 3, 6}) {
      FakeLM target(8, 1, 2.0f);
      FakeLM draft(8, 2, 0.0f, 1 << 20, &target, 1.5f);  // agrees with the target only partly
      Rng rng(11 + static_cast<uint64_t>(gamma));
      SpeculativeDecoder dec(target, &draft, sampling(temp), gamma, rng);
      dec.start(std::vector<int32_t>{3, 1}, 120);
      dec.run();
      SCOPED_TRACE(::testing::Message() << "T " << temp << " gamma " << gamma);
      expect_origins_follow_the_log(dec);
      expect_counts_match_stats(dec);
      const OriginCounts c = count_origins(dec.origins());
      EXPECT_GT(c.draft, 0);
      EXPECT_GT(c.correction, 0);  // the draft disagrees often enough for both kinds
      EXPECT_GT(c.bonus, 0);
    }
  }
}

TEST(TokenOrigin, TargetOnlyRunsAreAllTarget) {
  FakeLM target(8, 1, 2.0f);
  Rng rng(5);
  SpeculativeDecoder dec(target, nullptr, sampling(0.7f), 0, rng);
  dec.start(std::vector<int32_t>{2}, 40);
  dec.run();
  expect_origins_follow_the_log(dec);
  expect_counts_match_stats(dec);
  EXPECT_EQ(count_origins(dec.origins()).target, 40);
}

TEST(TokenOrigin, PromptLookupDraftsCountAsDrafts) {
  FakeLM target(6, 3, 1.0f);
  target.set_successor_bias(6.0f);  // the text cycles, so lookup finds matches
  NgramParams np;
  np.policy = NgramPolicy::Fixed;
  NgramDrafter drafter(target.n_vocab(), np);
  Rng rng(9);
  SpeculativeDecoder dec(target, drafter, sampling(0.0f), 4, rng);
  dec.start(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0, 1}, 80);
  dec.run();
  expect_origins_follow_the_log(dec);
  expect_counts_match_stats(dec);
  EXPECT_GT(count_origins(dec.origins()).draft, 0);
}

TEST(TokenOrigin, AStopTokenInsideARoundCutsItsOrigins) {
  FakeLM target(6, 1, 2.0f);
  FakeLM draft(6, 2, 0.0f, 1 << 20, &target, 0.0f);  // draft == target: long accepted runs
  for (int32_t stop_tok = 0; stop_tok < 6; ++stop_tok) {
    Rng rng(3);
    SpeculativeDecoder dec(target, &draft, sampling(0.0f), 5, rng);
    dec.start(std::vector<int32_t>{0, 5}, 30, [&](int32_t t) { return t == stop_tok; });
    dec.run();
    expect_origins_follow_the_log(dec);
    const DecodeStats& s = dec.stats();
    const OriginCounts c = count_origins(dec.origins());
    EXPECT_EQ(c.total(), s.emitted);
    EXPECT_EQ(c.target, s.baseline_steps);
    EXPECT_EQ(c.correction, s.corrections);
    EXPECT_EQ(c.bonus, s.bonus);
    EXPECT_LE(c.draft, s.accepted);  // accepted drafts after the stop token are not committed
  }
}

}  // namespace
}  // namespace specdec
