#include "cli/stats_report.h"

#include <gtest/gtest.h>

#include <string>

namespace specdec::cli {
namespace {

GenerationResult result_with_prompt(int32_t prompt_tokens, double prefill_ms) {
  GenerationResult r;
  r.stats.prompt_tokens = prompt_tokens;
  r.stats.prefill_ms = prefill_ms;
  r.stats.generated_tokens = 10;
  r.stats.decode_ms = 50.0;
  return r;
}

TEST(StatsReport, SummaryTimesThePrefill) {
  const std::string s = format_summary(result_with_prompt(128, 200.0), 12.0, 7, 2);
  EXPECT_NE(s.find("prompt:    128 tokens in 200.0 ms (640.0 tok/s)"), std::string::npos) << s;
  EXPECT_NE(s.find("generated: 10 tokens in 50.0 ms (200.0 tok/s)"), std::string::npos) << s;
  EXPECT_NE(s.find("seed 7"), std::string::npos) << s;
}

// A one-token prompt has nothing to prefill (its token goes into the first decode step): no
// rate computed from a near-zero time.
TEST(StatsReport, OneTokenPromptHasNoPrefillRate) {
  const std::string s = format_summary(result_with_prompt(1, 0.001), 12.0, 7, 2);
  EXPECT_NE(s.find("prompt:    1 token (evaluated with the first generated one)"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("tokens in 0.0 ms"), std::string::npos) << s;
}

// With a cached prefix (--prompt-cache, a follow-up turn) the rate is of the tokens read.
TEST(StatsReport, CachedPromptTokensAreNamedAndNotTimed) {
  GenerationResult r = result_with_prompt(128, 100.0);
  r.stats.cached_tokens = 78;
  std::string s = format_summary(r, 12.0, 7, 2);
  EXPECT_NE(s.find("prompt:    128 tokens, 78 from the cache, 50 read in 100.0 ms (500.0 tok/s)"),
            std::string::npos)
      << s;
  r.stats.cached_tokens = 127;
  s = format_summary(r, 12.0, 7, 2);
  EXPECT_NE(s.find("prompt:    128 tokens, 127 from the cache (the last one evaluated with the "
                   "first generated one)"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace specdec::cli
