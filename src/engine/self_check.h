// `specdec verify`: an end-user self-check that speculation is lossless on *their* models.
// It samples many short continuations of the same prompts with and without speculation and
// tests whether the two samples come from one distribution (total variation distance and a
// chi-square homogeneity test), and it compares the measured acceptance rate with the analytic
// one, the mean of sum_x min(p(x), q(x)) over the tested positions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "sampling/chi_square.h"

namespace specdec {

struct SelfCheckOptions {
  std::vector<std::string> prompts;
  int32_t samples = 200;         // continuations per prompt and mode
  int32_t tokens = 2;            // tokens per continuation
  GenerationOptions generation;  // sampling filter and gamma; max_tokens is set from `tokens`
  double alpha = 1e-3;           // family-wise significance level for the verdict
};

struct PromptCheck {
  std::string prompt;
  int64_t distinct = 0;  // distinct continuations seen in either sample
  double tv = 0;         // total variation distance between the two empirical distributions
  double tv_null = 0;    // mean TV between random re-splits of the pooled samples: the noise floor
  ChiSquareResult chi;   // homogeneity of the two samples
};

struct SelfCheckReport {
  std::vector<PromptCheck> prompts;
  int64_t drafted = 0, accepted = 0, tested = 0;  // tested: drafts the rule looked at
  double acceptance_rate = 0;      // accepted / drafted, as the run summary reports it
  double measured_acceptance = 0;  // accepted / tested: per-position success rate of the rule
  double analytic_acceptance = 0;  // mean of sum_x min(p, q) over the same tested positions
  double acceptance_z = 0;         // (measured - analytic) in standard errors
  bool distribution_ok = true, acceptance_ok = true;
  bool passed() const { return distribution_ok && acceptance_ok; }
};

// progress(done, total) is called after each generated sample.
SelfCheckReport run_self_check(Engine& engine, const SelfCheckOptions& options,
                               const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace specdec
