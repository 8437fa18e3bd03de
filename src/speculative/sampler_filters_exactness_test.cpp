// llama.cpp's further filters (typical, top-n-sigma, XTC) under speculation: each is a function of
// one row's logits, applied alike to the draft's q and the target's p, so the speculative output
// must be exactly the target's filtered distribution (chi-square against enumeration at T > 0) and
// greedy output the target's argmax whatever the filters say.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sampling/chi_square.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::joint_counts;
using testing::Models;
using testing::params;

SamplingParams typical(float t, float typical_p) {
  SamplingParams sp = params(t);
  sp.typical_p = typical_p;
  return sp;
}

SamplingParams sigma(float t, float n) {
  SamplingParams sp = params(t);
  sp.top_n_sigma = n;
  return sp;
}

SamplingParams xtc(float t, float probability, float threshold) {
  SamplingParams sp = params(t);
  sp.xtc_probability = probability;
  sp.xtc_threshold = threshold;
  return sp;
}

SamplingParams dynatemp(float t, float range, float exponent) {
  SamplingParams sp = params(t);
  sp.dynatemp_range = range;
  sp.dynatemp_exponent = exponent;
  return sp;
}

SamplingParams all_of_them() {
  SamplingParams sp = params(0.8f, 0.95f, 4);
  sp.typical_p = 0.9f;
  sp.top_n_sigma = 2.0f;
  sp.xtc_probability = 0.5f;
  sp.xtc_threshold = 0.1f;
  sp.dynatemp_range = 0.5f;
  return sp;
}

// Runs speculative decoding with sp from `prompt` (3-token continuations over 5 tokens, γ 3,
// 40,000 runs, seeded by `seed`), checks that the counts fit the target's joint under sp (level
// 1e-4) with drafts accepted, and that they do not fit the joint under `other` (the settings
// without what is being tested), so that the check could fail. `label` names the case.
void expect_targets_joint(Models& m, const SamplingParams& sp, const SamplingParams& other,
                          const std::vector<int32_t>& prompt, uint64_t seed,
                          const std::string& label) {
  ModelDrafter drafter(m.draft);
  Rng rng(seed);
  SpeculativeDecoder dec(m.target, drafter, sp, 3, rng);
  int64_t accepted = 0;
  const std::vector<int64_t> counts = joint_counts(
      dec, 5, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
  const ChiSquareResult r = chi_square_test(counts, exact_joint(m.target, sp, prompt, 3));
  EXPECT_EQ(r.impossible, 0) << label;
  EXPECT_GT(r.p_value, 1e-4) << label << " stat " << r.stat << " dof " << r.dof;
  EXPECT_GT(accepted, 0) << label;
  EXPECT_LT(chi_square_test(counts, exact_joint(m.target, other, prompt, 3)).p_value, 1e-6)
      << label;
}

// 3-token continuations over 5 tokens (125 cells), γ 3, 40,000 runs each; level 1e-4 per fit.
TEST(SamplerFiltersUnderSpeculation, JointDistributionIsTheFilteredTargets) {
  Models m(5, 1.0f);
  int config = 0;
  for (const SamplingParams& sp :
       {typical(1.0f, 0.6f), sigma(1.0f, 1.0f), xtc(1.0f, 0.5f, 0.15f), xtc(0.7f, 1.0f, 0.1f),
        dynatemp(1.0f, 0.9f, 3.0f), all_of_them()}) {
    // The filter really changed the distribution: the unfiltered joint does not fit the counts.
    expect_targets_joint(m, sp, params(sp.temperature, sp.top_p, sp.top_k),
                         {config % 5, 2, (config * 3) % 5}, 5100 + config,
                         "config " + std::to_string(config));
    ++config;
  }
}

// llama.cpp's order (the filters at temperature 1, the temperature last): the draft's q is built
// in the same order, so the output is the target's distribution in that order, and that differs
// from the temperature-first one with the same values.
TEST(SamplerFiltersUnderSpeculation, TemperatureLastIsTheTargetsInThatOrder) {
  Models m(5, 1.0f);
  SamplingParams nucleus = params(0.5f, 0.7f, 0, 0.2f);
  nucleus.temperature_last = true;
  SamplingParams hot_xtc = params(1.8f, 0.9f);
  hot_xtc.temperature_last = true;
  hot_xtc.xtc_probability = 0.6f;
  hot_xtc.xtc_threshold = 0.12f;
  int config = 0;
  for (const SamplingParams& sp : {nucleus, hot_xtc}) {
    SamplingParams first = sp;
    first.temperature_last = false;
    expect_targets_joint(m, sp, first, {config + 1, 3, 0}, 5200 + config,
                         "config " + std::to_string(config));
    ++config;
  }
}

TEST(SamplerFiltersUnderSpeculation, GreedyIgnoresTheFiltersAndEqualsTargetGreedy) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);
  SamplingParams sp = all_of_them();
  sp.temperature = 0.0f;
  sp.xtc_probability = 1.0f;  // would remove the argmax whenever two tokens pass 0.1
  EXPECT_EQ(testing::expect_greedy_is_target_greedy(m, sp, 6), 0);
}

}  // namespace
}  // namespace specdec
