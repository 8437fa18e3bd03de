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
#include <string>
#include <utility>

#include "engine/engine.h"
#include "server/http_listener.h"

namespace specdec::server {

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

  // Prometheus text of everything above, then the transport's connection counters.
  std::string render(const HttpListenerStats& transport = {}) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> http_;
  int64_t admitted_ = 0, finished_ = 0, cancelled_ = 0, failed_ = 0, in_flight_ = 0;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  int64_t rounds_ = 0, drafted_ = 0, accepted_ = 0;
  double decode_tps_ = 0;  // of the last request that generated anything
  int64_t queue_length_ = 0;
};

}  // namespace specdec::server
