// Server counters and gauges, rendered in Prometheus' text exposition format for GET /metrics.
// Thread-safe: HTTP threads record responses, the generation worker records finished requests.
//
// Accounting identity the tests rely on: every generation request admitted to the queue ends
// exactly once as finished, cancelled (client gone, or server shutting down) or failed, so
// generation_requests = finished + cancelled + failed + in flight.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/http_listener.h"

namespace specdec::server {

// A Prometheus histogram with fixed upper bounds (cumulative buckets, +Inf, sum, count).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "# HELP/# TYPE" lines and the samples of `name`.
  void render(std::ostream& out, const char* name, const char* help) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  enum class Outcome { Finished, Cancelled, Failed };

  // One HTTP response. Endpoints outside the API are counted under "other" so that scanners
  // cannot grow the label set without bound.
  void record_http(const std::string& path, int status);

  void admitted();  // a generation request entered the queue (in flight until it ends)
  // A generation request ended; stats may be partial (cancelled) or empty (failed/skipped).
  void ended(Outcome outcome, const GenerationStats& stats);
  void set_queue_length(int64_t n);
  // A job left the queue for the worker after waiting this long (its slot is then busy), and
  // later stopped running (a job cancelled while queued does neither).
  void started(double queue_wait_seconds);
  void stopped_running();
  // A job's first text reached its client's thread this long after it was admitted.
  void first_token(double seconds);
  // Slots the engine decodes at once; with more than one, target passes are batched across
  // slots and observe_target_pass records each (otherwise each request's rounds are recorded).
  void set_slots(int32_t n);
  void observe_target_pass(int64_t rows, int64_t sequences);

  // Prometheus text of everything above, then the transport's connection counters.
  std::string render(const HttpListenerStats& transport = {}) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> http_;
  int64_t admitted_ = 0, finished_ = 0, cancelled_ = 0, failed_ = 0, in_flight_ = 0;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, shared_tokens_ = 0, generated_tokens_ = 0;
  int64_t draft_shared_tokens_ = 0;
  int64_t rounds_ = 0, drafted_ = 0, accepted_ = 0;
  double decode_tps_ = 0;  // of the last request that generated anything
  int64_t queue_length_ = 0;
  int64_t slots_ = 1, slots_busy_ = 0;
  Histogram queue_wait_{{0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  Histogram ttft_{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  // Rows of each decode-time target pass: 1 for a plain step, γ + 1 for a verify pass.
  Histogram pass_rows_{{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 32, 48, 64, 96, 128, 256}};
  Histogram pass_sequences_{{1, 2, 3, 4, 6, 8, 12, 16, 32, 64}};
};

}  // namespace specdec::server
