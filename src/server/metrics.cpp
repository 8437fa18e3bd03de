#include "server/metrics.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <string_view>

namespace specdec::server {

namespace {

// Each a label of its own; any other path counts as "other" (the label set stays bounded).
constexpr std::array<std::string_view, 25> kKnownPaths = {"/v1/completions",
                                                          "/v1/chat/completions",
                                                          "/v1/responses",
                                                          "/v1/messages",
                                                          "/v1/messages/count_tokens",
                                                          "/completion",
                                                          "/completions",
                                                          "/infill",
                                                          "/tokenize",
                                                          "/detokenize",
                                                          "/v1/models",
                                                          "/health",
                                                          "/metrics",
                                                          "/",
                                                          "/api/chat",
                                                          "/api/generate",
                                                          "/api/show",
                                                          "/api/tags",
                                                          "/api/ps",
                                                          "/api/version",
                                                          "/v1/embeddings",
                                                          "/embedding",
                                                          "/embeddings",
                                                          "/api/embed",
                                                          "/api/embeddings"};

void header(std::ostream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::ostream& out, const char* name, const char* help) const {
  header(out, name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n";
  out << name << "_sum " << sum_ << "\n";
  out << name << "_count " << count_ << "\n";
}

void Metrics::started(double queue_wait_seconds) {
  std::lock_guard lock(mu_);
  queue_wait_.observe(queue_wait_seconds);
  ++slots_busy_;
}

void Metrics::stopped_running() {
  std::lock_guard lock(mu_);
  --slots_busy_;
}

void Metrics::set_slots(int32_t n) {
  std::lock_guard lock(mu_);
  slots_ = n;
}

void Metrics::observe_target_pass(int64_t rows, int64_t sequences) {
  std::lock_guard lock(mu_);
  pass_rows_.observe(static_cast<double>(rows));
  pass_sequences_.observe(static_cast<double>(sequences));
}

void Metrics::first_token(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::record_http(const std::string& path, int status) {
  std::string label = "other";
  for (auto p : kKnownPaths) {
    if (path == p) label = p;
  }
  // The slot actions, one label whatever the slot (POST /slots/{id}).
  if (path.starts_with("/slots/")) label = "/slots/{id}";
  std::lock_guard lock(mu_);
  ++http_[{label, status}];
}

void Metrics::admitted() {
  std::lock_guard lock(mu_);
  ++admitted_;
  ++in_flight_;
}

void Metrics::ended(Outcome outcome, const GenerationStats& s) {
  std::lock_guard lock(mu_);
  --in_flight_;
  switch (outcome) {
    case Outcome::Finished:
      ++finished_;
      break;
    case Outcome::Cancelled:
      ++cancelled_;
      break;
    case Outcome::Failed:
      ++failed_;
      break;
  }
  if (slots_ == 1) {  // one sequence: its rounds are the target's passes
    for (const RoundLog& round : s.spec.log) {
      pass_rows_.observe(round.gamma + 1);
      pass_sequences_.observe(1);
    }
  }
  prompt_tokens_ += s.prompt_tokens;
  cached_tokens_ += s.cached_tokens;
  shared_tokens_ += s.shared_tokens;
  draft_shared_tokens_ += s.draft_shared_tokens;
  generated_tokens_ += s.generated_tokens;
  rounds_ += s.spec.rounds;
  drafted_ += s.spec.drafted;
  accepted_ += s.spec.accepted;
  if (s.generated_tokens > 0 && s.decode_ms > 0) {
    decode_tps_ = s.generated_tokens * 1000.0 / s.decode_ms;
  }
}

void Metrics::set_queue_length(int64_t n) {
  std::lock_guard lock(mu_);
  queue_length_ = n;
}

std::string Metrics::render(const HttpListenerStats& transport) const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  out.precision(10);
  header(out, "specdec_http_requests_total", "counter", "HTTP responses by endpoint and status.");
  for (const auto& [key, n] : http_) {
    out << "specdec_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second
        << "\"} " << n << "\n";
  }
  auto counter = [&out](const char* name, const char* help, auto value) {
    header(out, name, "counter", help);
    out << name << " " << value << "\n";
  };
  auto gauge = [&out](const char* name, const char* help, auto value) {
    header(out, name, "gauge", help);
    out << name << " " << value << "\n";
  };
  counter("specdec_generation_requests_total", "Generation requests admitted to the queue.",
          admitted_);
  counter("specdec_generation_finished_total", "Generation requests that ran to completion.",
          finished_);
  counter("specdec_generation_cancelled_total",
          "Generation requests cancelled (client disconnected or server stopping).", cancelled_);
  counter("specdec_generation_failed_total", "Generation requests that failed with an error.",
          failed_);
  counter("specdec_prompt_tokens_total", "Prompt tokens of generation requests that ran.",
          prompt_tokens_);
  counter("specdec_prompt_tokens_cached_total",
          "Prompt tokens whose K/V came from a cache instead of a forward pass.", cached_tokens_);
  counter("specdec_prompt_tokens_shared_total",
          "Of the cached prompt tokens, those copied from another slot's cache.", shared_tokens_);
  counter("specdec_draft_prompt_tokens_shared_total",
          "Prompt tokens whose draft K/V was copied from another slot's draft cache.",
          draft_shared_tokens_);
  counter("specdec_generated_tokens_total", "Tokens generated (cancelled requests included).",
          generated_tokens_);
  counter("specdec_speculative_rounds_total", "Speculative rounds (draft then verify).", rounds_);
  counter("specdec_draft_tokens_total", "Draft tokens proposed.", drafted_);
  counter("specdec_draft_accepted_total", "Draft tokens accepted by the target.", accepted_);
  gauge("specdec_draft_acceptance_rate", "Accepted / drafted over the server's lifetime.",
        drafted_ > 0 ? static_cast<double>(accepted_) / static_cast<double>(drafted_) : 0.0);
  gauge("specdec_decode_tokens_per_second", "Decode speed of the last generation request.",
        decode_tps_);
  gauge("specdec_queue_length", "Generation requests waiting for the worker.", queue_length_);
  gauge("specdec_requests_in_flight", "Generation requests admitted and not yet ended.",
        in_flight_);
  counter("specdec_http_connections_total", "TCP connections accepted and served.",
          transport.connections);
  counter("specdec_http_connections_rejected_total",
          "Connections refused with 503 because --max-connections were open.",
          transport.rejected_connections);
  counter("specdec_http_request_timeouts_total",
          "Requests whose head and body did not arrive within --request-timeout (408).",
          transport.request_timeouts);
  counter("specdec_http_malformed_requests_total",
          "Requests the HTTP parser refused (bad framing, oversized headers, ...).",
          transport.malformed_requests);
  gauge("specdec_http_open_connections", "Connections open now.", transport.open_connections);
  gauge("specdec_slots_total", "Sequences the server decodes at once (--parallel).", slots_);
  gauge("specdec_slots_busy", "Slots generating now.", slots_busy_);
  queue_wait_.render(out, "specdec_queue_wait_seconds",
                     "Time from admission to the start of generation.");
  ttft_.render(out, "specdec_time_to_first_token_seconds",
               "Time from admission to the first text handed to the client's connection.");
  pass_rows_.render(out, "specdec_target_pass_rows",
                    "Rows per target pass (one slot: 1 for a plain step, gamma + 1 for a verify; "
                    "several: every slot's rows of the batched pass, prefill chunks included).");
  pass_sequences_.render(out, "specdec_target_pass_sequences",
                         "Sequences (slots) sharing each target pass.");
  return out.str();
}

}  // namespace specdec::server
