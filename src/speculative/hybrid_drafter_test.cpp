// Hybrid drafting (prompt lookup when it proposes enough, the draft model otherwise) keeps the
// target's distribution exactly, reproduces target-only greedy output, and really mixes both
// kinds of round on text that repeats.
#include "speculative/hybrid_drafter.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "sampling/chi_square.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::FakeLM;
using testing::greedy_reference;
using testing::joint_counts;
using testing::params;

struct Hybrid {
  Hybrid(FakeLM& draft_lm, int32_t vocab)
      : model(draft_lm), lookup(vocab, lookup_params()), hybrid(model, lookup) {}
  static NgramParams lookup_params() {
    NgramParams p;
    p.policy = NgramPolicy::Fixed;  // propose whenever the lookup matches
    p.n_min = 1;
    return p;
  }
  ModelDrafter model;
  NgramDrafter lookup;
  HybridDrafter hybrid;
};

TEST(HybridDrafter, JointDistributionIsTheTargets) {
  FakeLM target(5, 1, 2.0f);
  target.set_successor_bias(1.5f);  // continuations that echo earlier text are likely
  FakeLM draft(5, 2, 0.0f, 1 << 20, &target, 1.5f);
  int config = 0;
  for (int gamma : {2, 4}) {
    for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
      Hybrid h(draft, 5);
      const std::vector<int32_t> prompt{0, 1, 2, 3, 0, 1, 2, 3, config % 3};
      Rng rng(700 + config);
      SpeculativeDecoder dec(target, h.hybrid, sp, gamma, rng);
      const std::vector<int64_t> counts = joint_counts(dec, 5, prompt, 3, 40000);
      const ChiSquareResult r = chi_square_test(counts, exact_joint(target, sp, prompt, 3));
      EXPECT_EQ(r.impossible, 0);
      EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " stat " << r.stat << " dof " << r.dof;
      EXPECT_GT(h.hybrid.lookup_rounds(), 0) << "config " << config;
      EXPECT_GT(h.hybrid.model_rounds(), 0);
      ++config;
    }
  }
}

TEST(HybridDrafter, GreedyEqualsTargetGreedyAndMixesRounds) {
  FakeLM target(7, 1, 2.0f);
  target.set_rounding(true);
  target.set_successor_bias(2.0f);
  FakeLM draft(7, 2, 0.0f, 1 << 20, &target, 1.5f);
  int64_t lookup = 0, model = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 8; ++i) prompt.push_back((trial + i) % 7);
    const std::vector<int32_t> want = greedy_reference(target, prompt, 24);
    for (int gamma : {1, 3, 6}) {
      Hybrid h(draft, 7);
      Rng rng(1);
      SpeculativeDecoder dec(target, h.hybrid, params(0.0f), gamma, rng);
      dec.start(prompt, 24);
      dec.run();
      ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
      lookup += h.hybrid.lookup_rounds();
      model += h.hybrid.model_rounds();
    }
  }
  EXPECT_GT(lookup, 0);
  EXPECT_GT(model, 0);
}

// With the model not allowed, rounds the lookup proposes enough for still draft, the others
// draft nothing (plain steps), a lazily started draft model never runs, and greedy output stays
// the target's.
TEST(HybridDrafter, WithoutTheModelOnlyLookupDrafts) {
  FakeLM target(7, 1, 2.0f);
  target.set_rounding(true);
  target.set_successor_bias(2.0f);
  FakeLM draft(7, 2, 0.0f, 1 << 20, &target, 1.5f);
  int64_t lookup = 0;
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 8; ++i) prompt.push_back((trial + i) % 7);
    const std::vector<int32_t> want = greedy_reference(target, prompt, 24);
    Hybrid h(draft, 7);
    h.model.set_lazy_start(true);  // as the engine runs it: the prompt is read when it drafts
    h.hybrid.set_model_allowed(false);
    const int64_t draft_forwards = draft.forwards();
    Rng rng(1);
    SpeculativeDecoder dec(target, h.hybrid, params(0.0f), 4, rng);
    dec.start(prompt, 24);
    dec.run();
    ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
        << "trial " << trial;
    EXPECT_EQ(h.hybrid.model_rounds(), 0);
    EXPECT_EQ(draft.forwards(), draft_forwards) << "the draft model ran";
    lookup += h.hybrid.lookup_rounds();
  }
  EXPECT_GT(lookup, 0);
}

TEST(HybridDrafter, RejectsAZeroLookupMinimum) {
  FakeLM draft(5, 2, 1.0f);
  ModelDrafter m(draft);
  NgramDrafter l(5);
  EXPECT_THROW(HybridDrafter(m, l, 0), Error);
}

}  // namespace
}  // namespace specdec
