#include "server/metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace specdec::server {
namespace {

// The value of the sample whose name and labels are exactly `series`; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(Metrics, CountsRequestsTokensAndSpeculation) {
  Metrics m;
  m.record_http("/v1/completions", 200);
  m.record_http("/v1/completions", 200);
  m.record_http("/v1/chat/completions", 400);
  m.record_http("/wp-admin/evil", 404);
  m.record_http("/also/unknown", 404);
  m.record_http("/slots/0", 200);  // the slot actions share one label, whatever the slot
  m.record_http("/slots/9999", 200);

  GenerationStats s;
  s.prompt_tokens = 5;
  s.cached_tokens = 3;
  s.shared_tokens = 2;
  s.draft_shared_tokens = 1;
  s.generated_tokens = 20;
  s.decode_ms = 100;
  s.spec.rounds = 4;
  s.spec.drafted = 16;
  s.spec.accepted = 12;
  m.admitted();
  m.admitted();
  m.admitted();
  m.ended(Metrics::Outcome::Finished, s);
  m.ended(Metrics::Outcome::Cancelled, GenerationStats{});
  m.set_queue_length(3);

  const std::string text = m.render();
  EXPECT_EQ(sample(text, R"(specdec_http_requests_total{endpoint="/v1/completions",status="200"})"),
            2);
  EXPECT_EQ(
      sample(text, R"(specdec_http_requests_total{endpoint="/v1/chat/completions",status="400"})"),
      1);
  EXPECT_EQ(sample(text, R"(specdec_http_requests_total{endpoint="other",status="404"})"), 2);
  EXPECT_EQ(sample(text, R"(specdec_http_requests_total{endpoint="/slots/{id}",status="200"})"), 2);
  EXPECT_EQ(sample(text, "specdec_generation_requests_total"), 3);
  EXPECT_EQ(sample(text, "specdec_generation_finished_total"), 1);
  EXPECT_EQ(sample(text, "specdec_generation_cancelled_total"), 1);
  EXPECT_EQ(sample(text, "specdec_generation_failed_total"), 0);
  EXPECT_EQ(sample(text, "specdec_requests_in_flight"), 1);
  EXPECT_EQ(sample(text, "specdec_prompt_tokens_total"), 5);
  EXPECT_EQ(sample(text, "specdec_prompt_tokens_cached_total"), 3);
  EXPECT_EQ(sample(text, "specdec_prompt_tokens_shared_total"), 2);
  EXPECT_EQ(sample(text, "specdec_draft_prompt_tokens_shared_total"), 1);
  EXPECT_EQ(sample(text, "specdec_generated_tokens_total"), 20);
  EXPECT_EQ(sample(text, "specdec_speculative_rounds_total"), 4);
  EXPECT_EQ(sample(text, "specdec_draft_tokens_total"), 16);
  EXPECT_EQ(sample(text, "specdec_draft_accepted_total"), 12);
  EXPECT_DOUBLE_EQ(sample(text, "specdec_draft_acceptance_rate"), 0.75);
  EXPECT_DOUBLE_EQ(sample(text, "specdec_decode_tokens_per_second"), 200);
  EXPECT_EQ(sample(text, "specdec_queue_length"), 3);
}

TEST(Metrics, EveryFamilyHasHelpAndType) {
  const std::string text = Metrics().render();
  std::istringstream in(text);
  std::string line, last_type;
  int families = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      ++families;
      last_type = line.substr(7, line.find(' ', 7) - 7);
    } else if (line[0] != '#') {
      EXPECT_EQ(line.rfind(last_type, 0), 0u) << line;  // samples follow their TYPE line
    }
  }
  EXPECT_EQ(families, 28);
  EXPECT_EQ(sample(text, "specdec_draft_acceptance_rate"), 0);  // no division by zero
}

TEST(Metrics, HistogramsOfQueueWaitFirstTokenAndPassRows) {
  Metrics m;
  m.admitted();
  m.started(0.003);
  EXPECT_EQ(sample(m.render(), "specdec_slots_busy"), 1);
  m.first_token(0.2);
  m.stopped_running();
  GenerationStats s;
  s.spec.log = {RoundLog{4, 2, 3, {}, {}}, RoundLog{0, 0, 1, {}, {}}, RoundLog{4, 4, 5, {}, {}}};
  m.ended(Metrics::Outcome::Finished, s);
  const std::string text = m.render();
  EXPECT_EQ(sample(text, "specdec_slots_busy"), 0);
  EXPECT_EQ(sample(text, "specdec_slots_total"), 1);
  EXPECT_EQ(sample(text, "specdec_queue_wait_seconds_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(sample(text, "specdec_queue_wait_seconds_bucket{le=\"0.01\"}"), 1);
  EXPECT_EQ(sample(text, "specdec_queue_wait_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(sample(text, "specdec_queue_wait_seconds_sum"), 0.003);
  EXPECT_EQ(sample(text, "specdec_time_to_first_token_seconds_bucket{le=\"0.1\"}"), 0);
  EXPECT_EQ(sample(text, "specdec_time_to_first_token_seconds_bucket{le=\"0.25\"}"), 1);
  // Passes of 5, 1 and 5 rows: cumulative buckets.
  EXPECT_EQ(sample(text, "specdec_target_pass_rows_bucket{le=\"1\"}"), 1);
  EXPECT_EQ(sample(text, "specdec_target_pass_rows_bucket{le=\"4\"}"), 1);
  EXPECT_EQ(sample(text, "specdec_target_pass_rows_bucket{le=\"5\"}"), 3);
  EXPECT_EQ(sample(text, "specdec_target_pass_rows_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(sample(text, "specdec_target_pass_rows_sum"), 11);
}

TEST(Metrics, RendersTheTransportCounters) {
  HttpListenerStats t;
  t.connections = 7;
  t.rejected_connections = 2;
  t.request_timeouts = 3;
  t.malformed_requests = 4;
  t.open_connections = 1;
  const std::string text = Metrics().render(t);
  EXPECT_EQ(sample(text, "specdec_http_connections_total"), 7);
  EXPECT_EQ(sample(text, "specdec_http_connections_rejected_total"), 2);
  EXPECT_EQ(sample(text, "specdec_http_request_timeouts_total"), 3);
  EXPECT_EQ(sample(text, "specdec_http_malformed_requests_total"), 4);
  EXPECT_EQ(sample(text, "specdec_http_open_connections"), 1);
}

}  // namespace
}  // namespace specdec::server
