#include "cli/bench_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace specdec::cli {
namespace {

BenchRun run(int32_t gamma, int32_t tokens, double ms_per_token) {
  BenchRun r;
  r.category = std::string("summary");
  r.gamma = gamma;
  r.result.stats.generated_tokens = tokens;
  r.result.stats.decode_ms = tokens * ms_per_token;
  return r;
}

BenchRun baseline_run(double ms_per_token) { return run(0, 10, ms_per_token); }

// One plain step (1 token), a round with 2 drafts (3 tokens), one with 4 (5 tokens), and one
// decode step's worth of drafting time.
BenchRun speculative_run(double ms_per_token) {
  BenchRun r = run(4, 9, ms_per_token);
  r.result.stats.speculative = true;
  DecodeStats& d = r.result.stats.spec;
  d.log.push_back(RoundLog{0, 0, 1, {}, {}});
  d.log.push_back(RoundLog{2, 2, 3, {}, {}});
  d.log.push_back(RoundLog{4, 4, 5, {}, {}});
  d.rounds = 2;
  d.baseline_steps = 1;
  d.drafted = 6;
  d.accepted = 6;
  d.draft_seconds = 0.010;
  return r;
}

// The pass model charges each target pass the cost of its width (plain steps 1) plus drafting
// time in decode steps: (1 + 1.3 + 1.8 + 1) steps for 9 tokens.
TEST(BenchReport, PassModelChargesEachPassItsWidthCost) {
  const std::vector<BenchRun> runs = {baseline_run(10.0), speculative_run(8.0)};
  const std::vector<BenchRow> rows = summarize_runs(runs, {1.0, 1.1, 1.3, 1.5, 1.8});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].gamma, 0);
  EXPECT_EQ(rows[0].pass_model, 0.0);
  EXPECT_EQ(rows[1].gamma, 4);
  EXPECT_NEAR(rows[1].pass_model, 9.0 / (1.0 + 1.3 + 1.8 + 1.0), 1e-12);
  EXPECT_NEAR(rows[1].speedup, 10.0 / 8.0, 1e-12);
  const std::string table = format_table(rows);
  EXPECT_NE(table.find("passes"), std::string::npos) << table;
  EXPECT_NE(table.find(" 1.76x"), std::string::npos) << table;  // 9 / 5.1
}

TEST(BenchReport, PassModelNeedsCostsForEveryWidth) {
  const std::vector<BenchRun> runs = {baseline_run(10.0), speculative_run(8.0)};
  EXPECT_EQ(summarize_runs(runs)[1].pass_model, 0.0);  // no costs measured: left out
  EXPECT_NE(format_table(summarize_runs(runs)).find("    - "), std::string::npos);
  EXPECT_THROW(summarize_runs(runs, {1.0, 1.1, 1.3}), Error);  // the 5-token pass is not covered
}

}  // namespace
}  // namespace specdec::cli
