// The accept/reject rule in isolation: exactness of the emitted token's distribution, acceptance
// rates, edge cases of the residual, greedy mode, and the order in which uniforms are consumed.
#include "speculative/rejection_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "sampling/chi_square.h"
#include "speculative/rejection_rules.h"

namespace specdec {
namespace {

Distribution from_logits(const std::vector<float>& logits, float temperature = 1.0f, int top_k = 0,
                         float top_p = 1.0f) {
  SamplingParams sp;
  sp.temperature = temperature;
  sp.top_k = top_k;
  sp.top_p = top_p;
  sp.min_p = 0.0f;
  Distribution d;
  make_distribution(logits, sp, d);
  return d;
}

Distribution random_dist(Rng& rng, int vocab, int top_k = 0, float top_p = 1.0f) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = static_cast<float>(rng.uniform() * 4 - 2);
  return from_logits(logits, 1.0f, top_k, top_p);
}

Distribution explicit_dist(int vocab, std::vector<int32_t> ids, std::vector<float> probs) {
  Distribution d;
  d.n_vocab = vocab;
  d.ids = std::move(ids);
  d.probs = std::move(probs);
  return d;
}

std::vector<double> dense(const Distribution& d) {
  std::vector<double> out(static_cast<size_t>(d.n_vocab), 0.0);
  for (size_t i = 0; i < d.size(); ++i) out[static_cast<size_t>(d.ids[i])] = d.probs[i];
  return out;
}

// γ = 1: draws y ~ q, runs the rule, and histograms the first emitted token (y if accepted,
// the correction otherwise). Exactness means this histogram follows p.
ChiSquareResult first_token_fit(const Distribution& p, const Distribution& q, RuleVariant rule,
                                int trials, uint64_t seed) {
  Rng rng(seed);
  const Distribution bonus = p;  // the bonus is not the first token; any valid distribution
  const std::vector<Distribution> qs{q}, ps{p, bonus};
  std::vector<int64_t> counts(static_cast<size_t>(p.n_vocab), 0);
  for (int t = 0; t < trials; ++t) {
    const int32_t y = sample(q, rng);
    const VerifyResult r =
        verify_drafts_with_rule(std::span<const int32_t>(&y, 1), qs, ps, false, rng, rule);
    ++counts[static_cast<size_t>(r.n_accepted == 1 ? y : r.next_token)];
  }
  return chi_square_test(counts, dense(p));
}

struct Pair {
  Distribution p, q;
};

// Random pairs over vocab 4..8, including filtered supports that differ between p and q.
std::vector<Pair> random_pairs() {
  Rng rng(17);
  std::vector<Pair> pairs;
  for (int i = 0; i < 6; ++i) {
    const int vocab = 4 + i % 5;
    const int kp = i % 3 == 1 ? vocab - 1 : 0, kq = i % 2 == 1 ? 2 : 0;
    pairs.push_back(
        {random_dist(rng, vocab, kp), random_dist(rng, vocab, kq, i == 4 ? 0.7f : 1.f)});
  }
  return pairs;
}

TEST(RejectionSampler, FirstTokenFollowsTargetExactly) {
  int idx = 0;
  for (const Pair& pq : random_pairs()) {
    const ChiSquareResult r = first_token_fit(pq.p, pq.q, RuleVariant::Correct, 200000, 100 + idx);
    EXPECT_EQ(r.impossible, 0) << "pair " << idx;
    EXPECT_GT(r.p_value, 1e-3) << "pair " << idx << " stat " << r.stat << " dof " << r.dof;
    ++idx;
  }
}

TEST(RejectionSampler, BrokenRulesAreDetectedOnTheFirstToken) {
  // Each broken rule biases the first token; the same harness must reject it decisively.
  // (BonusFromLastDraftPos only affects the bonus; the decoder tests catch it.)
  const std::vector<Pair> pairs = random_pairs();
  for (RuleVariant rule : {RuleVariant::ResampleFromP, RuleVariant::ResidualOnDraftSupport,
                           RuleVariant::AcceptAlways, RuleVariant::IgnoreRatio}) {
    // Pair 1: q has top-k 2 and p keeps vocab - 1 ids, so supports differ (needed for the
    // draft-support bug); the others bias every pair.
    const Pair& pq = pairs[1];
    const ChiSquareResult r = first_token_fit(pq.p, pq.q, rule, 200000, 7);
    std::printf("first-token fit under %s: stat %.1f dof %d p %.3g impossible %lld\n",
                rule_name(rule), r.stat, r.dof, r.p_value, static_cast<long long>(r.impossible));
    EXPECT_LT(r.p_value, 1e-9) << rule_name(rule);
  }
}

TEST(RejectionSampler, AcceptanceRatePerPositionMatchesOverlap) {
  // Independent p_i, q_i per position: given the round reached position i, y_i ~ q_i is accepted
  // with probability β_i = Σ_x min(p_i(x), q_i(x)).
  Rng setup(3);
  const int gamma = 4, vocab = 6;
  std::vector<Distribution> q, p;
  std::vector<double> beta;
  for (int i = 0; i < gamma; ++i) {
    q.push_back(random_dist(setup, vocab));
    p.push_back(random_dist(setup, vocab));
    const std::vector<double> dp = dense(p.back()), dq = dense(q.back());
    double b = 0;
    for (int x = 0; x < vocab; ++x) b += std::min(dp[size_t(x)], dq[size_t(x)]);
    beta.push_back(b);
  }
  p.push_back(random_dist(setup, vocab));
  Rng rng(4);
  std::vector<int64_t> reached(gamma, 0), accepted(gamma, 0);
  std::vector<int32_t> drafts(gamma);
  for (int t = 0; t < 100000; ++t) {
    for (int i = 0; i < gamma; ++i) drafts[size_t(i)] = sample(q[size_t(i)], rng);
    const VerifyResult r = verify_drafts(drafts, q, p, false, rng);
    for (int i = 0; i <= std::min(r.n_accepted, gamma - 1); ++i) ++reached[size_t(i)];
    for (int i = 0; i < r.n_accepted; ++i) ++accepted[size_t(i)];
  }
  for (int i = 0; i < gamma; ++i) {
    const double n = static_cast<double>(reached[size_t(i)]);
    const double rate = static_cast<double>(accepted[size_t(i)]) / n;
    const double sigma = std::sqrt(beta[size_t(i)] * (1 - beta[size_t(i)]) / n);
    EXPECT_NEAR(rate, beta[size_t(i)], 4 * sigma) << "position " << i;
  }
}

TEST(RejectionSampler, IdenticalDistributionsAlwaysAccept) {
  Rng setup(9), rng(10);
  const Distribution d = random_dist(setup, 8);
  const std::vector<Distribution> q{d, d, d}, p{d, d, d, d};
  for (int t = 0; t < 1000; ++t) {
    const std::vector<int32_t> drafts{sample(d, rng), sample(d, rng), sample(d, rng)};
    const VerifyResult r = verify_drafts(drafts, q, p, false, rng);
    ASSERT_EQ(r.n_accepted, 3);
    ASSERT_TRUE(r.bonus);
  }
}

TEST(RejectionSampler, ZeroDraftProbabilityRejectsAndResidualCoversOutsideIds) {
  // y = 3 has q(3) = 0 (not drawn from q: the guard case): rejected without dividing by zero.
  // The residual max(0, p - q) includes ids 2 and 3 that q does not support at all.
  const Distribution q = explicit_dist(4, {0, 1}, {0.5f, 0.5f});
  const Distribution p = explicit_dist(4, {0, 2, 3}, {0.6f, 0.3f, 0.1f});
  const std::vector<Distribution> qs{q}, ps{p, p};
  const int32_t y = 3;
  Rng rng(5);
  std::vector<int64_t> counts(4, 0);
  const int n = 100000;
  for (int t = 0; t < n; ++t) {
    const VerifyResult r = verify_drafts(std::span<const int32_t>(&y, 1), qs, ps, false, rng);
    ASSERT_EQ(r.n_accepted, 0);
    ASSERT_FALSE(r.bonus);
    ++counts[size_t(r.next_token)];
  }
  // Residual: 0.1, 0, 0.3, 0.1 -> normalized 0.2, 0, 0.6, 0.2.
  const ChiSquareResult fit = chi_square_test(counts, std::vector<double>{0.2, 0, 0.6, 0.2});
  EXPECT_EQ(fit.impossible, 0);
  EXPECT_GT(fit.p_value, 1e-3);
}

TEST(RejectionSampler, VanishingResidualFallsBackToTarget) {
  // p = q and y outside both supports: the residual is exactly zero, so the correction must come
  // from p rather than from a 0/0 normalization.
  const Distribution d = explicit_dist(3, {1, 2}, {0.75f, 0.25f});
  const std::vector<Distribution> qs{d}, ps{d, d};
  const int32_t y = 0;
  Rng rng(6);
  std::vector<int64_t> counts(3, 0);
  for (int t = 0; t < 40000; ++t) {
    ++counts[size_t(verify_drafts(std::span<const int32_t>(&y, 1), qs, ps, false, rng).next_token)];
  }
  const ChiSquareResult fit = chi_square_test(counts, std::vector<double>{0, 0.75, 0.25});
  EXPECT_EQ(fit.impossible, 0);
  EXPECT_GT(fit.p_value, 1e-3);
}

TEST(RejectionSampler, GreedyAcceptsIffDraftIsArgmax) {
  const Distribution a = explicit_dist(5, {2}, {1.0f}), b = explicit_dist(5, {4}, {1.0f});
  const std::vector<Distribution> p{a, b, a, b};
  const std::vector<Distribution> q;  // unused in greedy mode
  Rng rng(1), untouched(1);
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{2, 4, 2}, q, p, true, rng).n_accepted, 3);
  const VerifyResult all = verify_drafts(std::vector<int32_t>{2, 4, 2}, q, p, true, rng);
  EXPECT_TRUE(all.bonus);
  EXPECT_EQ(all.next_token, 4);
  const VerifyResult r = verify_drafts(std::vector<int32_t>{2, 3, 2}, q, p, true, rng);
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.next_token, 4);
  EXPECT_FALSE(r.bonus);
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{0, 4, 2}, q, p, true, rng).next_token, 2);
  EXPECT_EQ(rng.next_u64(), untouched.next_u64()) << "greedy mode must not consume randomness";
}

TEST(RejectionSampler, ConsumesOneUniformPerTestAndPerDraw) {
  // Reproducibility relies on a fixed consumption order: a accepted tests, then either
  // (1 failed test + 1 correction draw) or (1 bonus draw).
  Rng setup(11);
  const int gamma = 3;
  std::vector<Distribution> q, p;
  for (int i = 0; i < gamma; ++i) {
    q.push_back(random_dist(setup, 6));
    p.push_back(random_dist(setup, 6));
  }
  p.push_back(random_dist(setup, 6));
  Rng rng(12);
  for (int t = 0; t < 2000; ++t) {
    std::vector<int32_t> drafts;
    for (int i = 0; i < gamma; ++i) drafts.push_back(sample(q[size_t(i)], rng));
    Rng shadow = rng;
    const VerifyResult r = verify_drafts(drafts, q, p, false, rng);
    const int used = r.bonus ? gamma + 1 : r.n_accepted + 2;
    for (int i = 0; i < used; ++i) shadow.next_u64();
    ASSERT_EQ(shadow.next_u64(), Rng(rng).next_u64()) << "trial " << t;
  }
}

TEST(RejectionSampler, SameSeedSameResults) {
  Rng setup(13);
  const std::vector<Distribution> q{random_dist(setup, 7), random_dist(setup, 7)};
  const std::vector<Distribution> p{random_dist(setup, 7), random_dist(setup, 7),
                                    random_dist(setup, 7)};
  Rng a(77), b(77);
  for (int t = 0; t < 1000; ++t) {
    const std::vector<int32_t> da{sample(q[0], a), sample(q[1], a)};
    const std::vector<int32_t> db{sample(q[0], b), sample(q[1], b)};
    const VerifyResult ra = verify_drafts(da, q, p, false, a);
    const VerifyResult rb = verify_drafts(db, q, p, false, b);
    ASSERT_EQ(ra.n_accepted, rb.n_accepted);
    ASSERT_EQ(ra.next_token, rb.next_token);
  }
}

TEST(RejectionSampler, RejectsMismatchedSpans) {
  Rng rng(1);
  const Distribution d = explicit_dist(2, {0}, {1.0f});
  const std::vector<Distribution> one{d}, two{d, d};
  EXPECT_THROW(verify_drafts(std::vector<int32_t>{0}, one, one, false, rng), Error);
  EXPECT_THROW(verify_drafts(std::vector<int32_t>{0}, two, two, false, rng), Error);
}

}  // namespace
}  // namespace specdec
