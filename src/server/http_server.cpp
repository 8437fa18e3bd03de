#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "server/connection_probe.h"
#include "server/generation_queue.h"
#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/request_parsing.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// How often a waiting HTTP thread checks that its client is still there.
constexpr milliseconds kPollInterval{50};
// HTTP threads beyond one per admissible generation request: /health, /metrics, /v1/models and
// the 503 answers must not wait behind long generations.
constexpr size_t kSpareHttpThreads = 8;
constexpr size_t kMaxHttpThreads = 512;

// nginx's "client closed request": logged and counted, never seen by the (absent) client.
constexpr int kClientClosed = 499;

const std::vector<std::string> kGenerationPaths = {"/v1/completions", "/v1/chat/completions"};
const std::vector<std::string> kGetPaths = {"/v1/models", "/health", "/metrics"};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(to_wire(error_json(e)), "application/json");
}

const char* status_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
    case 400:
    case 405:
      return "invalid_request_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, ServerConfig c)
      : engine(e),
        config(std::move(c)),
        queue([&e](std::span<const int32_t> prompt, const GenerationOptions& o,
                   const TextCallback& cb) { return e.generate(prompt, o, cb); },
              config.queue_size, metrics),
        model_ids{config.model_id, "specdec"},
        created(unix_now()),
        id_salt(std::random_device{}()) {}

  Engine& engine;
  ServerConfig config;
  Metrics metrics;  // declared before the queue, which records into it
  GenerationQueue queue;
  std::vector<std::string> model_ids;
  int64_t created;
  uint64_t id_salt;
  std::atomic<uint64_t> next_id{0};
  httplib::Server http;

  std::string make_id(Endpoint e) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%04llx", static_cast<unsigned long long>(id_salt),
                  static_cast<unsigned long long>(next_id.fetch_add(1) & 0xffff));
    return std::string(e == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + buf;
  }

  bool authorized(const httplib::Request& req) const {
    if (config.api_key.empty()) return true;
    const std::string got = req.get_header_value("Authorization");
    const std::string want = "Bearer " + config.api_key;
    // Constant-time comparison: the key must not leak through response timing.
    unsigned diff = got.size() != want.size() ? 1u : 0u;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      diff |= static_cast<unsigned>(got[i] ^ want[i]);
    }
    return diff == 0;
  }

  // Wraps a handler: API key, ApiError/exception -> OpenAI error JSON, the request count.
  httplib::Server::Handler guarded(
      bool needs_key, std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    return [this, needs_key, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        if (needs_key && !authorized(req)) {
          throw ApiError(401, "missing or invalid API key: send 'Authorization: Bearer KEY'",
                         "authentication_error", "", "invalid_api_key");
        }
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {  // the engine refusing an input it was given
        send_error(res, invalid_request(e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
      }
      if (res.status == -1) res.status = 200;
      metrics.record_http(req.path, res.status);
    };
  }

  void generation(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void stream(const std::shared_ptr<Job>& job, ResponseMeta meta, bool include_usage,
              const httplib::Request& req, httplib::Response& res);
  void routes();
};

void HttpServer::Impl::generation(Endpoint endpoint, const httplib::Request& req,
                                  httplib::Response& res) {
  const CompletionRequest r = parse_request(endpoint, req.body);
  check_model(r.model, model_ids);
  const std::string text =
      endpoint == Endpoint::Completions ? r.prompt : engine.chat_template().apply(r.messages, true);
  std::vector<int32_t> prompt = engine.tokenize_prompt(text);
  GenerationOptions o;
  o.max_tokens = resolve_max_tokens(r, static_cast<int32_t>(prompt.size()), engine.n_ctx());
  o.sampling.temperature = r.temperature;
  o.sampling.top_k = r.top_k;
  o.sampling.top_p = r.top_p;
  o.sampling.min_p = r.min_p;
  o.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  o.stop = r.stop;
  o.ignore_eos = r.ignore_eos;
  o.speculative = r.speculative;
  o.draft_max = r.draft_max.value_or(config.draft_max);
  o.draft_length = config.draft_length;
  o.hybrid = config.hybrid;

  std::shared_ptr<Job> job = queue.submit(std::move(prompt), std::move(o));
  if (!job) {
    throw ApiError(503,
                   str_cat("the server is busy: ", config.queue_size,
                           " requests are already waiting; retry later"),
                   "server_error", "", "queue_full");
  }
  const ResponseMeta meta{endpoint, make_id(endpoint), unix_now(),
                          r.model.empty() ? config.model_id : r.model};
  if (r.stream) return stream(job, meta, r.include_usage, req, res);

  const ConnectionProbe probe(req.remote_addr, req.remote_port, req.local_port);
  std::string ignored;
  while (!job->wait(ignored, kPollInterval)) {
    ignored.clear();
    if (probe.peer_closed()) {
      job->cancel();  // the worker skips it or stops at its next token; nobody waits for that
      res.status = kClientClosed;
      return;
    }
  }
  if (job->failed()) throw ApiError(500, "generation failed: " + job->error(), "server_error");
  if (job->result().finish == FinishReason::Cancelled) {
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }
  res.set_content(to_wire(completion_json(meta, job->result())), "application/json");
}

void HttpServer::Impl::stream(const std::shared_ptr<Job>& job, ResponseMeta meta,
                              bool include_usage, const httplib::Request& req,
                              httplib::Response& res) {
  struct State {
    std::shared_ptr<Job> job;
    ResponseMeta meta;
    bool include_usage;
    ConnectionProbe probe;
    bool first = true;
  };
  auto state = std::make_shared<State>(
      State{job, std::move(meta), include_usage,
            ConnectionProbe(req.remote_addr, req.remote_port, req.local_port)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // Runs on this request's HTTP thread after the headers are sent, called again until it
  // calls sink.done() or returns false (which aborts the connection).
  auto provider = [state](size_t /*offset*/, httplib::DataSink& sink) {
    auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
    std::string text;
    const bool done = state->job->wait(text, kPollInterval);
    if (!text.empty()) {
      if (!write(sse_event(text_chunk_json(state->meta, text, state->first)))) {
        state->job->cancel();
        return false;
      }
      state->first = false;
    } else if (!done && state->probe.peer_closed()) {
      state->job->cancel();
      return false;
    }
    if (!done) return true;
    const Job& j = *state->job;
    bool ok = true;
    if (j.failed()) {
      ok = write(
          sse_event(error_json(ApiError(500, "generation failed: " + j.error(), "server_error"))));
    } else if (j.result().finish == FinishReason::Cancelled) {
      ok = write(sse_event(error_json(
          ApiError(503, "the server is shutting down", "server_error", "", "shutting_down"))));
    } else {
      ok = write(sse_event(final_chunk_json(state->meta, j.result())));
      if (ok && state->include_usage) {
        ok = write(sse_event(usage_chunk_json(state->meta, j.result())));
      }
    }
    ok = ok && write(std::string(kSseDone));
    if (ok) sink.done();
    return ok;
  };
  // Called when the response is destroyed; success is false when the stream was cut short.
  auto releaser = [state](bool success) {
    if (!success) state->job->cancel();
  };
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

void HttpServer::Impl::routes() {
  http.Post("/v1/completions", guarded(true, [this](const auto& req, auto& res) {
              generation(Endpoint::Completions, req, res);
            }));
  http.Post("/v1/chat/completions", guarded(true, [this](const auto& req, auto& res) {
              generation(Endpoint::ChatCompletions, req, res);
            }));
  http.Get("/v1/models", guarded(true, [this](const auto&, auto& res) {
             res.set_content(to_wire(models_json(config.model_id, created)), "application/json");
           }));
  http.Get("/health", guarded(false, [](const auto&, auto& res) {
             res.set_content(R"({"status":"ok"})", "application/json");
           }));
  http.Get("/metrics", guarded(true, [this](const auto&, auto& res) {
             metrics.set_queue_length(static_cast<int64_t>(queue.queued()));
             res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
           }));
  // Everything else: 405 on a known path with another method, 404 on an unknown path. Handlers
  // match in registration order, so these catch-alls come last.
  auto fallback = guarded(true, [](const httplib::Request& req, httplib::Response& res) {
    const auto known = [&req](const std::vector<std::string>& paths) {
      return std::find(paths.begin(), paths.end(), req.path) != paths.end();
    };
    if (known(kGenerationPaths) || known(kGetPaths)) {
      res.set_header("Allow", known(kGenerationPaths) ? "POST" : "GET, HEAD");
      throw ApiError(405, str_cat("method ", req.method, " is not allowed on ", req.path),
                     "invalid_request_error", "", "method_not_allowed");
    }
    throw ApiError(404, str_cat("no such endpoint: ", req.method, " ", req.path), "not_found_error",
                   "", "unknown_url");
  });
  const std::string any = ".*";
  http.Get(any, fallback);
  http.Post(any, fallback);
  http.Put(any, fallback);
  http.Patch(any, fallback);
  http.Delete(any, fallback);
  http.Options(any, fallback);

  // Errors cpp-httplib produces itself (413 for a body over the limit, 400 for a malformed
  // request line): give them the OpenAI error body. Our own error responses already have one.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = str_cat("HTTP ", res.status);
        if (res.status == 400) {
          message = "malformed HTTP request (request line, headers or body framing)";
        } else if (res.status == 413) {
          message = str_cat("the request body exceeds the limit of ", config.max_body_bytes,
                            " bytes (--max-body-bytes)");
        }
        send_error(res, ApiError(res.status, message, status_type(res.status), "",
                                 res.status == 413 ? "request_too_large" : ""));
        metrics.record_http(req.path, res.status);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, ApiError(500, "internal error", "server_error"));
      });
}

HttpServer::HttpServer(Engine& engine, ServerConfig config)
    : impl_(std::make_unique<Impl>(engine, std::move(config))) {
  const size_t threads =
      std::min(kMaxHttpThreads, impl_->config.queue_size + 1 + kSpareHttpThreads);
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->http.set_payload_max_length(impl_->config.max_body_bytes);
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const std::string& host = impl_->config.host;
  if (impl_->config.port == 0) {
    const int port = impl_->http.bind_to_any_port(host);
    if (port <= 0) fail("cannot listen on ", host, " (any port)");
    return port;
  }
  if (!impl_->http.bind_to_port(host, impl_->config.port)) {
    fail("cannot listen on ", host, ":", impl_->config.port,
         " (address in use, or not an address of this machine)");
  }
  return impl_->config.port;
}

bool HttpServer::run() { return impl_->http.listen_after_bind(); }

void HttpServer::stop() {
  // Generations first: HTTP threads waiting on them then answer and return, so that stopping
  // the listener (which joins those threads) cannot hang.
  impl_->queue.shutdown();
  impl_->http.stop();
}

std::string model_id_from_path(const std::string& path) {
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  const std::string ext = ".gguf";
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
    name.resize(name.size() - ext.size());
  }
  return name;
}

}  // namespace specdec::server
