// What `specdec bench` measures and how it is summarized: one BenchRun per generation, rows per
// (category, temperature, gamma) with medians, acceptance spreads and the analytic speedup
// model next to the measured one, a text table for stdout and the raw JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace specdec::cli {

struct BenchRun {
  std::string category, prompt_id;
  float temperature = 0;
  int32_t gamma = 0;  // 0: target-only baseline
  int32_t repeat = 0;
  int32_t order = 0;  // position of this configuration in its repeat's rotated order
  GenerationOptions options;
  GenerationResult result;

  double ms_per_token() const;
  double tokens_per_s() const;
};

struct BenchRow {
  std::string category;
  float temperature = 0;
  int32_t gamma = 0;  // 0: the baseline row
  int32_t runs = 0;
  double tokens_per_s = 0;                        // median over runs
  double ms_per_token = 0;                        // median over runs
  double acc_mean = 0, acc_min = 0, acc_max = 0;  // per-run accepted / drafted
  double alpha = 0;                               // pooled accepted / drafted
  double analytic_alpha = 0;      // pooled mean of sum min(p, q) over tested positions
  double accepted_per_round = 0;  // pooled accepted / rounds
  double speedup = 0;             // baseline median ms/token / this row's median ms/token
  double c = 0;                   // draft seconds per drafted token / baseline seconds per token
  double verify_cost = 0;         // verify seconds per round / baseline seconds per token
  double theory = 0;              // E(alpha, gamma) / (gamma c + 1)
  double theory_verify = 0;       // E(alpha, gamma) / (gamma c + verify_cost)
  // Pass by pass: median over runs of tokens / (sum over the run's target passes of the cost of
  // a pass of that width, in decode steps, + its drafting time in decode steps). Plain steps
  // (no draft) cost 1. 0 when no pass costs were measured.
  double pass_model = 0;
};

// Groups runs by (category, temperature, gamma) in first-seen category/temperature order and
// ascending gamma, the baseline (gamma 0) first within each group. pass_cost[k - 1] is the cost
// of a target pass over k tokens in decode steps (pass_cost[0] = 1), for the pass model; empty
// leaves it 0. Throws specdec::Error if a run has a pass wider than pass_cost covers.
std::vector<BenchRow> summarize_runs(const std::vector<BenchRun>& runs,
                                     const std::vector<double>& pass_cost = {});

struct CacheCheck {
  int32_t prompt_tokens = 0, tokens = 0, repeats = 0;
  std::vector<double> cached_ms, uncached_ms;  // per repeat, prefill included
  bool same_tokens = true;
};

std::string format_table(const std::vector<BenchRow>& rows);
std::string format_cache_check(const CacheCheck& check);

nlohmann::json run_to_json(const BenchRun& run, int n_threads);
nlohmann::json row_to_json(const BenchRow& row);
nlohmann::json cache_check_to_json(const CacheCheck& check);

}  // namespace specdec::cli
