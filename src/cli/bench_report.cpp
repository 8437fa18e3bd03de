#include "cli/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/stats_report.h"
#include "common/error.h"
#include "engine/bench_stats.h"

namespace specdec::cli {

double BenchRun::ms_per_token() const {
  const int32_t n = result.stats.generated_tokens;
  return n > 0 ? result.stats.decode_ms / n : 0.0;
}

double BenchRun::tokens_per_s() const {
  const double ms = result.stats.decode_ms;
  return ms > 0 ? result.stats.generated_tokens * 1000.0 / ms : 0.0;
}

namespace {

struct Totals {
  int64_t rounds = 0, baseline_steps = 0, drafted = 0, accepted = 0;
  double draft_s = 0, verify_s = 0, overlap_sum = 0;
  int64_t overlap_n = 0;
  void add(const DecodeStats& d) {
    rounds += d.rounds;
    baseline_steps += d.baseline_steps;
    drafted += d.drafted;
    accepted += d.accepted;
    draft_s += d.draft_seconds;
    verify_s += d.verify_seconds;
    for (const RoundLog& l : d.log) {
      for (float o : l.overlap) overlap_sum += o;
      overlap_n += static_cast<int64_t>(l.overlap.size());
    }
  }
};

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

namespace {

// tokens / (target passes charged their measured width cost + drafting), in decode steps.
double pass_model_speedup(const BenchRun& run, const std::vector<double>& pass_cost,
                          double base_s) {
  const DecodeStats& d = run.result.stats.spec;
  double cost = 0;
  for (const RoundLog& l : d.log) {
    const auto width = static_cast<size_t>(l.gamma) + 1;
    if (width > pass_cost.size()) {
      fail("bench: a round verified ", width, " tokens, but pass costs cover ", pass_cost.size());
    }
    cost += pass_cost[width - 1];
  }
  cost += ratio(d.draft_seconds, base_s);
  return ratio(static_cast<double>(run.result.stats.generated_tokens), cost);
}

}  // namespace

std::vector<BenchRow> summarize_runs(const std::vector<BenchRun>& runs,
                                     const std::vector<double>& pass_cost) {
  // Group keys in first-seen order of (category, temperature); gammas ascending within.
  std::vector<std::pair<std::string, float>> groups;
  for (const BenchRun& r : runs) {
    const std::pair<std::string, float> key{r.category, r.temperature};
    if (std::find(groups.begin(), groups.end(), key) == groups.end()) groups.push_back(key);
  }
  std::vector<BenchRow> rows;
  for (const auto& [category, temp] : groups) {
    std::map<int32_t, std::vector<const BenchRun*>> by_gamma;
    for (const BenchRun& r : runs) {
      if (r.category == category && r.temperature == temp) by_gamma[r.gamma].push_back(&r);
    }
    double base_ms = 0;  // median baseline ms/token of this group; 0 if it has no baseline
    if (auto it = by_gamma.find(0); it != by_gamma.end()) {
      std::vector<double> ms;
      for (const BenchRun* r : it->second) ms.push_back(r->ms_per_token());
      base_ms = median(ms);
    }
    for (const auto& [gamma, group] : by_gamma) {
      BenchRow row;
      row.category = category;
      row.temperature = temp;
      row.gamma = gamma;
      row.runs = static_cast<int32_t>(group.size());
      std::vector<double> tps, ms, acc;
      Totals t;
      for (const BenchRun* r : group) {
        tps.push_back(r->tokens_per_s());
        ms.push_back(r->ms_per_token());
        acc.push_back(r->result.stats.spec.acceptance_rate());
        t.add(r->result.stats.spec);
      }
      row.tokens_per_s = median(tps);
      row.ms_per_token = median(ms);
      row.speedup = ratio(base_ms, row.ms_per_token);
      if (gamma > 0) {
        const Spread s = spread(acc);
        row.acc_mean = s.mean;
        row.acc_min = s.min;
        row.acc_max = s.max;
        row.alpha = ratio(static_cast<double>(t.accepted), static_cast<double>(t.drafted));
        row.analytic_alpha = ratio(t.overlap_sum, static_cast<double>(t.overlap_n));
        row.accepted_per_round =
            ratio(static_cast<double>(t.accepted), static_cast<double>(t.rounds));
        const double base_s = base_ms / 1000.0;
        row.c = ratio(ratio(t.draft_s, static_cast<double>(t.drafted)), base_s);
        // Target-only steps inside a speculative run (an n-gram drafter with no match) are
        // timed as verify work too; charge them one baseline step each so that what is left is
        // the cost of the verify passes proper.
        const double verify_s =
            std::max(0.0, t.verify_s - static_cast<double>(t.baseline_steps) * base_s);
        row.verify_cost = ratio(ratio(verify_s, static_cast<double>(t.rounds)), base_s);
        row.theory = theoretical_speedup(row.alpha, gamma, row.c);
        if (!pass_cost.empty() && base_s > 0) {
          std::vector<double> model;
          for (const BenchRun* r : group)
            model.push_back(pass_model_speedup(*r, pass_cost, base_s));
          row.pass_model = median(model);
        }
        if (row.verify_cost > 0)
          row.theory_verify = theoretical_speedup(row.alpha, gamma, row.c, row.verify_cost);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

namespace {

std::string fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

}  // namespace

std::string format_table(const std::vector<BenchRow>& rows) {
  std::ostringstream out;
  const BenchRow* prev = nullptr;
  char line[256];
  for (const BenchRow& r : rows) {
    if (prev == nullptr || prev->category != r.category || prev->temperature != r.temperature) {
      out << (prev ? "\n" : "") << "category " << r.category << ", T " << fmt("%g", r.temperature)
          << "\n";
      out << "gamma  runs   tok/s  ms/tok  speedup  theory  +verify  passes  accept % (min-max)    "
             "acc/round  E[tok]  c      verify/step\n";
    }
    prev = &r;
    if (r.gamma == 0) {
      std::snprintf(line, sizeof line, "base   %4d  %6.1f  %6.2f    1.00x\n", r.runs,
                    r.tokens_per_s, r.ms_per_token);
      out << line;
      continue;
    }
    const std::string passes = r.pass_model > 0 ? fmt("%5.2fx", r.pass_model) : "    - ";
    std::snprintf(line, sizeof line,
                  "%-5d  %4d  %6.1f  %6.2f  %6.2fx  %5.2fx  %6.2fx  %s  %5.1f (%5.1f-%5.1f)    "
                  "%9.2f  %6.2f  %5.3f  %11.2f\n",
                  r.gamma, r.runs, r.tokens_per_s, r.ms_per_token, r.speedup, r.theory,
                  r.theory_verify, passes.c_str(), 100 * r.acc_mean, 100 * r.acc_min,
                  100 * r.acc_max, r.accepted_per_round,
                  expected_tokens_per_round(r.alpha, r.gamma), r.c, r.verify_cost);
    out << line;
  }
  out << "\nspeedup: median baseline ms/token over median speculative ms/token (same run).\n"
         "theory: E/(gamma c + 1) with E = (1 - a^(gamma+1))/(1 - a), a = pooled acceptance,\n"
         "c = draft time per drafted token / baseline time per token; +verify: E/(gamma c + v)\n"
         "with v = verify/step, the measured verify pass cost in baseline decode steps.\n"
         "passes: tokens / (each target pass charged the cost of a pass of its width, measured\n"
         "before the runs: plain steps 1, verify passes as in the pass-cost line; plus drafting),\n"
         "median over runs. Unlike theory it counts the passes that carried no draft.\n";
  return out.str();
}

std::string format_cache_check(const CacheCheck& c) {
  const double cached = median(c.cached_ms), uncached = median(c.uncached_ms);
  std::ostringstream out;
  out << "KV cache ablation: target only, greedy, " << c.tokens << " tokens after a "
      << c.prompt_tokens << "-token prompt, median of " << c.repeats << "\n";
  out << "  with cache:    " << fmt("%.1f", cached) << " ms ("
      << fmt("%.2f", ratio(cached, c.tokens)) << " ms/token)\n";
  out << "  without cache: " << fmt("%.1f", uncached) << " ms ("
      << fmt("%.2f", ratio(uncached, c.tokens)) << " ms/token, whole sequence recomputed per "
      << "token)\n";
  out << "  cache speedup: " << fmt("%.2f", ratio(uncached, cached))
      << "x, same tokens: " << (c.same_tokens ? "yes" : "NO") << "\n";
  return out.str();
}

nlohmann::json run_to_json(const BenchRun& r, int n_threads) {
  nlohmann::json j = stats_to_json(r.result, r.options, n_threads);
  j["category"] = r.category;
  j["prompt"] = r.prompt_id;
  j["temperature"] = r.temperature;
  j["gamma"] = r.gamma;
  j["repeat"] = r.repeat;
  j["order"] = r.order;
  j["ms_per_token"] = r.ms_per_token();
  j["analytic_acceptance_rate"] = mean_overlap(r.result.stats.spec);
  return j;
}

nlohmann::json row_to_json(const BenchRow& r) {
  return {{"category", r.category},
          {"temperature", r.temperature},
          {"gamma", r.gamma},
          {"runs", r.runs},
          {"tokens_per_s_median", r.tokens_per_s},
          {"ms_per_token_median", r.ms_per_token},
          {"acceptance_mean", r.acc_mean},
          {"acceptance_min", r.acc_min},
          {"acceptance_max", r.acc_max},
          {"acceptance_pooled", r.alpha},
          {"analytic_acceptance", r.analytic_alpha},
          {"accepted_per_round", r.accepted_per_round},
          {"expected_tokens_per_round",
           r.gamma > 0 ? expected_tokens_per_round(r.alpha, r.gamma) : 1.0},
          {"speedup", r.speedup},
          {"cost_ratio_c", r.c},
          {"verify_cost", r.verify_cost},
          {"theoretical_speedup", r.theory},
          {"theoretical_speedup_with_verify_cost", r.theory_verify},
          {"pass_model_speedup", r.pass_model}};
}

nlohmann::json cache_check_to_json(const CacheCheck& c) {
  const double cached = median(c.cached_ms), uncached = median(c.uncached_ms);
  return {{"prompt_tokens", c.prompt_tokens},
          {"tokens", c.tokens},
          {"repeats", c.repeats},
          {"cached_ms", c.cached_ms},
          {"uncached_ms", c.uncached_ms},
          {"cached_ms_median", cached},
          {"uncached_ms_median", uncached},
          {"speedup", ratio(uncached, cached)},
          {"same_tokens", c.same_tokens}};
}

}  // namespace specdec::cli
