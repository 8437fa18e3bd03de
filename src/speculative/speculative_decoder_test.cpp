// The full loop with fake models: exact distribution of the output (chi-square against the
// target's joint distribution, enumerated; harness in exactness_harness_test_util.h), detection
// of broken rules, greedy equivalence, and the cache protocol.
#include "speculative/speculative_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/chi_square.h"
#include "speculative/exactness_harness_test_util.h"
#include "speculative/fake_lm.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::FakeLM;
using testing::greedy_reference;
using testing::joint_counts;
using testing::Models;
using testing::params;

struct JointRun {
  std::vector<int64_t> counts;
  DecodeStats last_stats;
};

JointRun speculative_joint(Models& m, const SamplingParams& sp, int gamma,
                           const std::vector<int32_t>& prompt, int length, int trials,
                           uint64_t seed, RuleVariant rule = RuleVariant::Correct) {
  Rng rng(seed);
  SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
  dec.set_verifier(verifier_for(rule));
  JointRun run;
  run.counts = joint_counts(dec, m.target.n_vocab(), prompt, length, trials);
  run.last_stats = dec.stats();
  return run;
}

ChiSquareResult joint_fit(Models& m, const SamplingParams& sp, int gamma,
                          const std::vector<int32_t>& prompt, int length, int trials, uint64_t seed,
                          RuleVariant rule = RuleVariant::Correct) {
  const JointRun run = speculative_joint(m, sp, gamma, prompt, length, trials, seed, rule);
  return chi_square_test(run.counts, exact_joint(m.target, sp, prompt, length));
}

TEST(SpeculativeDecoder, JointDistributionMatchesTargetAcrossSettings) {
  // 3-token continuations over a 5-token vocabulary (125 cells), for every combination of γ,
  // temperature and top-p, plus top-k and min-p. γ = 5 > 3 also exercises the budget cut inside
  // a round. Each fit is a fixed-seed test at level 1e-4 (36 fits: family-wise ~0.4%).
  Models m(5);
  int config = 0;
  for (int gamma : {1, 2, 3, 5}) {
    for (float temperature : {0.5f, 1.0f, 1.5f}) {
      for (float top_p : {1.0f, 0.8f}) {
        const std::vector<int32_t> prompt{config % 5, (config * 3 + 1) % 5};
        const SamplingParams sp = params(temperature, top_p);
        const ChiSquareResult r = joint_fit(m, sp, gamma, prompt, 3, 40000, 1000 + config);
        EXPECT_EQ(r.impossible, 0) << "gamma " << gamma << " T " << temperature;
        EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " T " << temperature << " top_p "
                                   << top_p << " stat " << r.stat << " dof " << r.dof;
        ++config;
      }
    }
  }
  for (int gamma : {1, 2, 3, 5}) {
    for (const SamplingParams& sp :
         {params(1.0f, 1.0f, 3), params(1.2f, 0.9f, 4, 0.1f), params(0.8f, 1.0f, 0, 0.2f)}) {
      const std::vector<int32_t> prompt{config % 5};
      const ChiSquareResult r = joint_fit(m, sp, gamma, prompt, 3, 40000, 1000 + config);
      EXPECT_EQ(r.impossible, 0);
      EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " top_k " << sp.top_k << " min_p "
                                 << sp.min_p << " stat " << r.stat << " dof " << r.dof;
      ++config;
    }
  }
}

TEST(SpeculativeDecoder, TwoTokenJointWithLargeSample) {
  // Fewer cells, many more samples: small biases would show here.
  Models m(6);
  for (int gamma : {1, 3}) {
    const ChiSquareResult r = joint_fit(m, params(1.0f), gamma, {2, 4}, 2, 100000, 77 + gamma);
    EXPECT_EQ(r.impossible, 0);
    EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " stat " << r.stat << " dof " << r.dof;
  }
}

TEST(SpeculativeDecoder, BrokenRulesFailTheJointTest) {
  // The same harness, each broken rule on a setting where its bias is structural. With
  // 20000 samples the correct rule passes above (p > 1e-4); each broken rule must give p < 1e-6.
  struct Case {
    RuleVariant rule;
    SamplingParams sp;
    int gamma;
  };
  const std::vector<Case> cases{
      {RuleVariant::ResampleFromP, params(1.0f), 2},
      {RuleVariant::ResidualOnDraftSupport, params(1.0f, 1.0f, 2), 2},
      {RuleVariant::BonusFromLastDraftPos, params(1.0f), 1},
      {RuleVariant::AcceptAlways, params(1.0f), 2},
      {RuleVariant::IgnoreRatio, params(1.0f), 2},
  };
  Models m(5);
  for (const Case& c : cases) {
    const ChiSquareResult r = joint_fit(m, c.sp, c.gamma, {1, 3}, 3, 20000, 4242, c.rule);
    std::printf("joint fit under %-22s: stat %8.1f dof %3d p %.3g impossible %lld\n",
                rule_name(c.rule), r.stat, r.dof, r.p_value, static_cast<long long>(r.impossible));
    EXPECT_TRUE(r.p_value < 1e-6 || r.impossible > 0) << rule_name(c.rule);
    const ChiSquareResult ok = joint_fit(m, c.sp, c.gamma, {1, 3}, 3, 20000, 4242);
    EXPECT_GT(ok.p_value, 1e-4) << "correct rule on the same setting";
  }
}

// Acceptance at draft position 1 and 2 of the first round, against the exact values:
//   β_1 = Σ_x min(p_1, q_1)(x) at the prompt;
//   P(accept 2 | accept 1) = Σ_y min(p_1, q_1)(y) β_2(prompt + y) / β_1, since y_1 is accepted and
//   equal to y with probability min(p_1, q_1)(y).
TEST(SpeculativeDecoder, AcceptanceRateMatchesOverlap) {
  Models m(6);
  const SamplingParams sp = params(1.0f);
  const std::vector<int32_t> prompt{3};
  const auto overlap_at = [&](const std::vector<int32_t>& ctx, std::vector<double>* mins) {
    Distribution p, q;
    make_distribution(m.target.logits_for(ctx), sp, p);
    make_distribution(m.draft.logits_for(ctx), sp, q);
    double b = 0;
    for (int32_t x = 0; x < 6; ++x) {
      const double mn = std::min(p.prob(x), q.prob(x));
      if (mins) mins->push_back(mn);
      b += mn;
    }
    return b;
  };
  std::vector<double> mins;
  const double beta1 = overlap_at(prompt, &mins);
  double joint2 = 0;
  for (int32_t y = 0; y < 6; ++y) joint2 += mins[size_t(y)] * overlap_at({3, y}, nullptr);
  const double beta2 = joint2 / beta1;

  Rng rng(31);
  SpeculativeDecoder dec(m.target, &m.draft, sp, 2, rng);
  int64_t reached1 = 0, acc1 = 0, acc2 = 0;
  for (int t = 0; t < 50000; ++t) {
    dec.start(prompt, 3);
    dec.step();
    const int32_t a = dec.stats().log.front().accepted;
    ++reached1;
    acc1 += a >= 1;
    acc2 += a >= 2;
  }
  const double r1 = double(acc1) / double(reached1), r2 = double(acc2) / double(acc1);
  EXPECT_NEAR(r1, beta1, 4 * std::sqrt(beta1 * (1 - beta1) / double(reached1)));
  EXPECT_NEAR(r2, beta2, 4 * std::sqrt(beta2 * (1 - beta2) / double(acc1)));
  std::printf("acceptance: pos1 %.4f (exact %.4f), pos2 %.4f (exact %.4f)\n", r1, beta1, r2, beta2);
}

TEST(SpeculativeDecoder, GreedyEqualsTargetGreedy) {
  // Integer logits make exact ties common, so the tie rule is exercised too.
  Models m(7, 1.5f);
  m.target.set_rounding(true);
  Rng prompts(5);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> prompt;
    const int len = 1 + trial % 4;
    for (int i = 0; i < len; ++i) prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    const std::vector<int32_t> want = greedy_reference(m.target, prompt, 24);
    for (int gamma = 1; gamma <= 8; ++gamma) {
      Rng rng(1);
      SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), gamma, rng);
      dec.start(prompt, 24);
      dec.run();
      ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
    }
    Rng rng(1);
    SpeculativeDecoder base(m.target, nullptr, params(0.0f), 4, rng);
    base.start(prompt, 24);
    base.run();
    ASSERT_EQ(std::vector<int32_t>(base.generated().begin(), base.generated().end()), want);
  }
}

TEST(SpeculativeDecoder, CacheProtocolHoldsAfterEveryRound) {
  // After each step: the target holds exactly t[0..n-1); the draft holds t[0..d) with d <= n-1.
  // Within each round: the draft's first call starts at the previous d and feeds t[d..n); the
  // target's single call starts at n-1 and feeds [t[n-1], y_1..y_γ]. So no cache ever holds a
  // rejected token when a forward runs, and every row used comes from the committed context.
  for (const float noise : {0.0f, 1.0f, 3.0f}) {  // 0: the draft equals the target (all accepted)
    Models m(6, noise);
    m.target.set_recording(true);
    m.draft.set_recording(true);
    Rng rng(8);
    const int gamma = 4;
    SpeculativeDecoder dec(m.target, &m.draft, params(1.0f), gamma, rng);
    dec.start(std::vector<int32_t>{1, 2, 3}, 60);
    int all_accepted = 0;
    while (!dec.done()) {
      const std::vector<int32_t> before = dec.tokens();
      const auto n = static_cast<int32_t>(before.size());
      const int32_t d = dec.draft_committed();
      m.target.clear_calls();
      m.draft.clear_calls();
      dec.step();
      const std::vector<int32_t>& t = dec.tokens();
      const auto n_new = static_cast<int32_t>(t.size());
      ASSERT_EQ(m.target.cache(), std::vector<int32_t>(t.begin(), t.end() - 1));
      ASSERT_LE(dec.draft_committed(), n_new - 1);
      ASSERT_EQ(m.draft.cache(),
                std::vector<int32_t>(t.begin(), t.begin() + dec.draft_committed()));
      const RoundLog& log = dec.stats().log.back();
      ASSERT_EQ(log.emitted, n_new - n);
      ASSERT_EQ(static_cast<int32_t>(log.target_entropy.size()),
                std::min(log.accepted + 1, log.gamma + 1));

      const auto& tc = m.target.calls();
      ASSERT_EQ(tc[0].kind, FakeLM::Call::Forward);
      ASSERT_EQ(tc[0].start, n - 1);
      ASSERT_EQ(tc[0].tokens.size(), static_cast<size_t>(log.gamma) + 1);
      ASSERT_EQ(tc[0].tokens[0], before.back());
      if (log.gamma == 0) continue;
      const auto& dc = m.draft.calls();
      ASSERT_EQ(dc[0].start, d);
      ASSERT_EQ(dc[0].tokens, std::vector<int32_t>(before.begin() + d, before.end()));
      // Drafts fed to the draft model are exactly those later sent to the target.
      for (int i = 1; i < log.gamma; ++i) {
        ASSERT_EQ(dc[size_t(i)].tokens, std::vector<int32_t>{tc[0].tokens[size_t(i)]});
      }
      // Accepted drafts are committed verbatim.
      for (int i = 0; i < std::min(log.accepted, log.emitted); ++i) {
        ASSERT_EQ(t[size_t(n + i)], tc[0].tokens[size_t(i) + 1]);
      }
      if (log.accepted == log.gamma && log.emitted == log.gamma + 1) {
        ++all_accepted;
        ASSERT_EQ(dec.draft_committed(), n_new - 2) << "y_γ was never fed to the draft";
      } else if (log.emitted == log.accepted + 1) {
        ASSERT_EQ(dec.draft_committed(), n_new - 1);
      }
    }
    if (noise == 0.0f) {
      EXPECT_GT(all_accepted, 5);
    }
    EXPECT_EQ(dec.generated().size(), 60u);
  }
}

TEST(SpeculativeDecoder, StopTokenEndsGenerationMidRound) {
  Models m(6, 0.0f);  // draft == target: long accepted runs, so stops land inside rounds
  Rng rng(3);
  const std::vector<int32_t> prompt{0, 5};
  const std::vector<int32_t> ref = greedy_reference(m.target, prompt, 30);
  // Stop at the first occurrence of the token at position 7 of the reference.
  const int32_t stop_tok = ref[7];
  const auto first = std::find(ref.begin(), ref.end(), stop_tok) - ref.begin();
  SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), 5, rng);
  dec.start(prompt, 30, [&](int32_t t) { return t == stop_tok; });
  dec.run();
  EXPECT_EQ(dec.stop_reason(), StopReason::StopToken);
  ASSERT_EQ(static_cast<long>(dec.generated().size()), first + 1);
  EXPECT_TRUE(std::equal(dec.generated().begin(), dec.generated().end(), ref.begin()));
  EXPECT_EQ(m.target.cache(), std::vector<int32_t>(dec.tokens().begin(), dec.tokens().end() - 1));

  // Sampling: the stop token, when it appears, is always the last token.
  Models s(6, 1.0f);
  for (int trial = 0; trial < 300; ++trial) {
    SpeculativeDecoder d2(s.target, &s.draft, params(1.0f), 4, rng);
    d2.start(prompt, 12, [](int32_t t) { return t == 2; });
    d2.run();
    const auto g = d2.generated();
    const auto it = std::find(g.begin(), g.end(), 2);
    if (it != g.end()) {
      ASSERT_EQ(it + 1, g.end());
      ASSERT_EQ(d2.stop_reason(), StopReason::StopToken);
    } else {
      ASSERT_EQ(g.size(), 12u);
      ASSERT_EQ(d2.stop_reason(), StopReason::MaxTokens);
    }
  }
}

TEST(SpeculativeDecoder, TokenBudgetShrinksGammaAndCutsRounds) {
  Models m(6, 0.0f);  // all accepted: every round would emit γ + 1 without the budget
  Rng rng(4);
  for (int budget : {1, 2, 3, 7}) {
    SpeculativeDecoder dec(m.target, &m.draft, params(1.0f), 8, rng);
    dec.start(std::vector<int32_t>{4}, budget);
    dec.run();
    EXPECT_EQ(static_cast<int>(dec.generated().size()), budget);
    EXPECT_EQ(dec.stop_reason(), StopReason::MaxTokens);
    for (const RoundLog& log : dec.stats().log) EXPECT_LE(log.gamma, budget - 1);
    EXPECT_EQ(m.target.length(), static_cast<int32_t>(dec.tokens().size()) - 1);
  }
  SpeculativeDecoder none(m.target, &m.draft, params(1.0f), 3, rng);
  none.start(std::vector<int32_t>{4}, 0);
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.step(), 0);
}

TEST(SpeculativeDecoder, GammaLimitCapsEachRoundAndKeepsGreedyOutput) {
  Models m(7, 1.5f);
  m.target.set_rounding(true);
  const std::vector<int32_t> prompt = {3, 1};
  const std::vector<int32_t> want = greedy_reference(m.target, prompt, 30);
  int32_t limit = 8;
  Rng rng(1);
  SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), 6, rng);
  dec.set_gamma_limit([&limit] { return limit; });
  dec.start(prompt, 30);
  // The limit is asked every round: 8 (above γ 6), then 2, then 0 (target-only steps).
  for (int round = 0; !dec.done(); ++round) {
    limit = round < 2 ? 8 : round < 5 ? 2 : 0;
    dec.step();
  }
  ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want);
  const auto& log = dec.stats().log;
  ASSERT_GT(log.size(), 5u);
  for (size_t r = 0; r < log.size(); ++r) {
    const int32_t cap = r < 2 ? 6 : r < 5 ? 2 : 0;
    EXPECT_LE(log[r].gamma, cap) << "round " << r;
  }
  EXPECT_GT(dec.stats().baseline_steps, 0);
}

TEST(SpeculativeDecoder, ContextCapacityShrinksGammaAndStops) {
  // Target capacity 10 with a 3-token prompt: the last step feeds position 9, so exactly 8 tokens
  // come out, identical to target-only greedy. A draft with a smaller context falls back to
  // target-only steps once it is full, with the same output.
  for (const int32_t draft_cap : {64, 6}) {
    Models m(6, 1.0f, 10, draft_cap);
    Rng rng(2);
    const std::vector<int32_t> prompt{1, 1, 4};
    SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), 6, rng);
    dec.start(prompt, 100);
    dec.run();
    EXPECT_EQ(dec.stop_reason(), StopReason::ContextFull);
    const std::vector<int32_t> want = greedy_reference(m.target, prompt, 8);
    EXPECT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want);
    EXPECT_LE(m.draft.length(), draft_cap);
    if (draft_cap == 6) {
      EXPECT_GT(dec.stats().baseline_steps, 0);
    }
  }
  Models m(6, 1.0f, 4);
  Rng rng(2);
  SpeculativeDecoder dec(m.target, &m.draft, params(1.0f), 2, rng);
  EXPECT_THROW(dec.start(std::vector<int32_t>{1, 2, 3, 4, 5}, 3), Error);
}

TEST(SpeculativeDecoder, GammaOneAndBaselineMatchInDistribution) {
  // γ = 1 and target-only steps driven through step_baseline: both follow the target.
  Models m(5);
  const SamplingParams sp = params(1.0f, 0.9f);
  const std::vector<int32_t> prompt{2};
  const std::vector<double> want = exact_joint(m.target, sp, prompt, 2);
  Rng rng(12);
  SpeculativeDecoder dec(m.target, &m.draft, sp, 1, rng);
  std::vector<int64_t> counts(25, 0);
  for (int t = 0; t < 40000; ++t) {
    dec.start(prompt, 2);
    while (!dec.done()) dec.step_baseline();
    ++counts[size_t(dec.generated()[0] * 5 + dec.generated()[1])];
  }
  const ChiSquareResult r = chi_square_test(counts, want);
  EXPECT_EQ(r.impossible, 0);
  EXPECT_GT(r.p_value, 1e-4);
  EXPECT_EQ(dec.stats().rounds, 0);
}

TEST(SpeculativeDecoder, SameSeedSameOutputAndStats) {
  Models m(6);
  std::vector<int32_t> out[2];
  int64_t accepted[2];
  for (int run = 0; run < 2; ++run) {
    Rng rng(2025);
    SpeculativeDecoder dec(m.target, &m.draft, params(0.9f, 0.95f), 3, rng);
    dec.start(std::vector<int32_t>{0, 1}, 50);
    dec.run();
    out[run].assign(dec.generated().begin(), dec.generated().end());
    accepted[run] = dec.stats().accepted;
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(accepted[0], accepted[1]);
}

// Building a verify pass's target distributions on a thread pool changes nothing: the same seed
// gives the same tokens and the same acceptance with no pool and with pools of 1, 2 and 3
// threads, at T > 0 with top-p (where each distribution is real work) and greedy.
TEST(SpeculativeDecoder, PooledTargetDistributionsGiveTheSameRun) {
  for (float temp : {0.9f, 0.0f}) {
    std::vector<int32_t> want;
    int64_t want_accepted = -1;
    for (int threads : {0, 1, 2, 3}) {
      Models m(40);
      std::unique_ptr<ThreadPool> pool;
      if (threads > 0) pool = std::make_unique<ThreadPool>(threads);
      Rng rng(77);
      SpeculativeDecoder dec(m.target, &m.draft, params(temp, 0.95f), 4, rng);
      dec.set_thread_pool(pool.get());
      dec.start(std::vector<int32_t>{3, 1, 4}, 120);
      dec.run();
      const std::vector<int32_t> got(dec.generated().begin(), dec.generated().end());
      ASSERT_EQ(got.size(), 120u);
      ASSERT_GT(dec.stats().rounds, 10);
      if (threads == 0) {
        want = got;
        want_accepted = dec.stats().accepted;
        continue;
      }
      EXPECT_EQ(got, want) << "T " << temp << ", " << threads << " threads";
      EXPECT_EQ(dec.stats().accepted, want_accepted) << "T " << temp << ", " << threads;
    }
  }
}

// A target whose verify passes give NaN logits in every row after the first: with the
// distributions built on a pool, the error reaches the caller as the same clear exception
// whichever thread hit it.
class NanLaterRowsLM final : public CausalLM {
 public:
  explicit NanLaterRowsLM(FakeLM& base) : base_(base) {}
  int32_t n_vocab() const override { return base_.n_vocab(); }
  int32_t length() const override { return base_.length(); }
  int32_t capacity() const override { return base_.capacity(); }
  void truncate(int32_t n) override { base_.truncate(n); }
  void forward(std::span<const int32_t> tokens, std::vector<float>& logits) override {
    base_.forward(tokens, logits);
    for (size_t row = 1; row < tokens.size(); ++row) {
      logits[row * static_cast<size_t>(n_vocab()) + 1] = NAN;
    }
  }

 private:
  FakeLM& base_;
};

TEST(SpeculativeDecoder, PooledDistributionErrorsReachTheCaller) {
  ThreadPool pool(3);
  for (int trial = 0; trial < 40; ++trial) {  // so that workers, not only the caller, hit one
    Models m(12);
    NanLaterRowsLM target(m.target);
    Rng rng(5 + static_cast<uint64_t>(trial));
    SpeculativeDecoder dec(target, &m.draft, params(0.9f, 0.95f), 6, rng);
    dec.set_thread_pool(&pool);
    dec.start(std::vector<int32_t>{0}, 20);
    try {
      dec.step();
      FAIL() << "expected an error for NaN logits";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
    }
  }
}

TEST(SpeculativeDecoder, StatsAreConsistent) {
  Models m(6);
  Rng rng(6);
  const int gamma = 3;
  SpeculativeDecoder dec(m.target, &m.draft, params(1.0f), gamma, rng);
  dec.start(std::vector<int32_t>{5}, 200);
  dec.run();
  const DecodeStats& s = dec.stats();
  int64_t hist_total = 0, hist_accepted = 0;
  for (size_t a = 0; a < s.accepted_hist.size(); ++a) {
    hist_total += s.accepted_hist[a];
    hist_accepted += static_cast<int64_t>(a) * s.accepted_hist[a];
  }
  EXPECT_EQ(s.accepted_hist.size(), size_t(gamma) + 1);
  EXPECT_EQ(hist_total, s.rounds);
  EXPECT_EQ(hist_accepted, s.accepted);
  EXPECT_LE(s.accepted, s.drafted);
  EXPECT_EQ(s.emitted, 200);
  EXPECT_EQ(static_cast<int64_t>(s.log.size()), s.rounds + s.baseline_steps);
  EXPECT_GT(s.acceptance_rate(), 0.2);
  EXPECT_GT(s.tokens_per_target_call(), 1.0);
  EXPECT_GE(s.draft_seconds, 0.0);
  EXPECT_GE(s.verify_seconds, 0.0);
  for (const RoundLog& log : s.log) {
    for (float h : log.target_entropy) {
      EXPECT_GE(h, 0.0f);
      EXPECT_LE(h, std::log(6.0f) + 1e-4f);
    }
  }
}

TEST(SpeculativeDecoder, ResumesFromACachedPrefix) {
  // n_cached: the prefix already in both caches is kept, the rest of the prompt is prefilled;
  // output equals a cold start.
  Models m(6, 1.0f);
  const std::vector<int32_t> prompt{3, 1, 4, 1, 5};
  Rng a(9), b(9);
  SpeculativeDecoder cold(m.target, &m.draft, params(0.7f), 3, a);
  cold.start(prompt, 10);
  cold.run();
  const std::vector<int32_t> want(cold.generated().begin(), cold.generated().end());
  SpeculativeDecoder warm(m.target, &m.draft, params(0.7f), 3, b);
  warm.start(prompt, 10, {}, std::min(m.draft.length(), 3));
  warm.run();
  EXPECT_EQ(std::vector<int32_t>(warm.generated().begin(), warm.generated().end()), want);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

TEST(SpeculativeDecoder, ALazyDraftReadsThePromptAtItsFirstProposalAndChangesNothing) {
  // ModelDrafter::set_lazy_start moves the draft's prompt reading from start() into the first
  // proposal's catch-up: the same drafts, the same random stream, the same text.
  const std::vector<int32_t> prompt{3, 1, 4, 1, 5, 2, 2};
  std::vector<int32_t> want;
  for (bool lazy : {false, true}) {
    Models m(6, 1.0f);
    ModelDrafter drafter(m.draft);
    drafter.set_lazy_start(lazy);
    Rng rng(21);
    SpeculativeDecoder dec(m.target, drafter, params(0.7f), 3, rng);
    dec.start(prompt, 24);
    EXPECT_EQ(m.draft.length(), lazy ? 0 : 6) << "lazy " << lazy;
    EXPECT_EQ(drafter.lag(7), lazy ? 7 : 1) << "lazy " << lazy;
    dec.run();
    const std::vector<int32_t> got(dec.generated().begin(), dec.generated().end());
    EXPECT_EQ(got.size(), 24u);
    if (lazy) {
      EXPECT_EQ(got, want);
    } else {
      want = got;
    }
  }
}

TEST(SpeculativeDecoder, ADraftCacheShorterThanTheTargetsReadsTheRest) {
  // The target may hold more of the prompt than the draft (a slot whose last request ran
  // target-only): the draft keeps its own prefix, reads the rest, and the text is a cold start's.
  Models m(6, 1.0f);
  const std::vector<int32_t> prompt{3, 1, 4, 1, 5, 2};
  Rng a(4), b(4);
  SpeculativeDecoder cold(m.target, &m.draft, params(0.7f), 3, a);
  cold.start(prompt, 12);
  cold.run();
  const std::vector<int32_t> want(cold.generated().begin(), cold.generated().end());
  // Target holds the prompt's first 5 tokens, the draft its first 2.
  m.target.truncate(0);
  m.target.forward_last(std::span<const int32_t>(prompt).first(5), nullptr);
  m.draft.truncate(0);
  m.draft.forward_last(std::span<const int32_t>(prompt).first(2), nullptr);
  SpeculativeDecoder warm(m.target, &m.draft, params(0.7f), 3, b);
  warm.start(prompt, 12, {}, 5);
  warm.run();
  EXPECT_EQ(std::vector<int32_t>(warm.generated().begin(), warm.generated().end()), want);
}

}  // namespace
}  // namespace specdec
