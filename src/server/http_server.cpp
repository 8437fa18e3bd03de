#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>

#include "common/error.h"
#include "server/generation_queue.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/native_api.h"
#include "server/openai_format.h"
#include "server/request_parsing.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// How often a waiting connection thread checks that its client is still there.
constexpr milliseconds kPollInterval{50};
// stop(): how long cancelled requests may take to write their last words before connections
// are cut.
constexpr milliseconds kStopWriteGrace{1000};

// nginx's "client closed request": logged and counted, never seen by the (absent) client.
constexpr int kClientClosed = 499;

const std::vector<std::string> kGenerationPaths = {
    "/v1/completions", "/v1/chat/completions", "/completion", "/completions", "/infill",
    "/tokenize",       "/detokenize"};
const std::vector<std::string> kGetPaths = {"/v1/models", "/health", "/metrics"};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(HttpResponder& res, const ApiError& e) {
  if (!res.started()) res.send(e.status(), "application/json", to_wire(error_json(e)));
}

const char* status_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 408:
    case 413:
    case 414:
    case 431:
    case 400:
    case 405:
      return "invalid_request_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// The error body of a status the transport or the router answers by itself.
std::string transport_error_body(int status, const std::string& message) {
  std::string code;
  if (status == 413) code = "request_too_large";
  if (status == 408) code = "request_timeout";
  if (status == 503) code = "too_many_connections";
  return to_wire(error_json(ApiError(status, message, status_type(status), "", code)));
}

HttpListenerConfig listener_config(const ServerConfig& c) {
  HttpListenerConfig l;
  l.host = c.host;
  l.port = c.port;
  l.limits.max_body = c.max_body_bytes;
  l.max_connections = c.max_connections;
  l.request_timeout = c.request_timeout;
  l.keep_alive_timeout = c.keep_alive_timeout;
  l.write_timeout = c.write_timeout;
  return l;
}

ApiError loading_error() {
  return ApiError(503, "the model is still loading; retry shortly", "server_error", "",
                  "model_loading");
}

ApiError shutting_down_error() {
  return ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
}

void cancel_jobs(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (const auto& job : jobs) job->cancel();
}

// Starts a response of server-sent events; false (the jobs cancelled) when that failed.
bool begin_event_stream(HttpResponder& res, const std::vector<std::shared_ptr<Job>>& jobs) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  if (res.begin_stream(200, "text/event-stream")) return true;
  cancel_jobs(jobs);
  return false;
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(ServerConfig c)
      : config(std::move(c)),
        model_ids{config.model_id, "specdec"},
        created(unix_now()),
        id_salt(std::random_device{}()),
        listener(
            listener_config(config),
            [this](const HttpRequest& req, HttpResponder& res) { handle(req, res); },
            [this](int status, const std::string& message) {
              metrics.record_http("", status);
              return transport_error_body(status, message);
            }) {}

  ServerConfig config;
  Metrics metrics;  // declared before the queue, which records into it
  std::atomic<Engine*> engine{nullptr};
  std::unique_ptr<GenerationQueue> queue;  // created by attach()
  std::atomic<bool> draining{false};
  std::vector<std::string> model_ids;
  int64_t created;
  uint64_t id_salt;
  std::atomic<uint64_t> next_id{0};
  HttpListener listener;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;

  std::string make_id(Endpoint e) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%04llx", static_cast<unsigned long long>(id_salt),
                  static_cast<unsigned long long>(next_id.fetch_add(1) & 0xffff));
    return std::string(e == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + buf;
  }

  bool authorized(const HttpRequest& req) const {
    if (config.api_key.empty()) return true;
    const std::string_view got = req.header("authorization");
    const std::string want = "Bearer " + config.api_key;
    // Constant-time comparison: the key must not leak through response timing.
    unsigned diff = got.size() != want.size() ? 1u : 0u;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      diff |= static_cast<unsigned>(got[i] ^ want[i]);
    }
    return diff == 0;
  }

  // The Access-Control-Allow-Origin value for a request's Origin ("" when CORS is off, the
  // request names no origin, or its origin is not allowed).
  std::string cors_origin(const HttpRequest& req) const {
    const std::string_view origin = req.header("origin");
    if (origin.empty()) return "";
    for (const std::string& allowed : config.allowed_origins) {
      if (allowed == "*") return "*";
      if (allowed == origin) return std::string(origin);
    }
    return "";
  }

  // The engine once attached; otherwise the request is refused with 503 "loading".
  Engine& ready_engine() const {
    Engine* e = engine.load(std::memory_order_acquire);
    if (e == nullptr) throw loading_error();
    return *e;
  }

  void handle(const HttpRequest& req, HttpResponder& res);
  void route(const HttpRequest& req, HttpResponder& res);
  void generation(Endpoint endpoint, const HttpRequest& req, HttpResponder& res);
  // llama-server's /completion and /infill (server/native_api.h).
  void native(NativeEndpoint endpoint, const HttpRequest& req, HttpResponder& res);
  void native_stream(const std::vector<std::shared_ptr<Job>>& jobs,
                     const std::vector<std::vector<int32_t>>& prompts, size_t per_prompt,
                     const NativeMeta& meta, const NativeRequest& r, HttpResponder& res);
  // The options a request's fields give, before the per-choice ones (max_tokens, seed).
  GenerationOptions request_options(const CompletionRequest& r, const Engine& e) const;
  // Each prompt's n choices as jobs (choice i of prompt p at p * n + i); 503 when the queue is
  // full (what was submitted is cancelled).
  std::vector<std::shared_ptr<Job>> submit_jobs(const std::vector<std::vector<int32_t>>& prompts,
                                                const std::vector<int32_t>& max_tokens,
                                                const GenerationOptions& o,
                                                const CompletionRequest& r);
  // Waits for every job; false (the jobs cancelled, a 499 logged) when the client left.
  bool wait_all(const std::vector<std::shared_ptr<Job>>& jobs, HttpResponder& res);
  void tokenize(const HttpRequest& req, HttpResponder& res);
  void detokenize(const HttpRequest& req, HttpResponder& res);
  void stream(const std::vector<std::shared_ptr<Job>>& jobs, const ResponseMeta& meta,
              std::span<const EchoedPrompt> echoes, size_t choices_per_prompt, bool include_usage,
              HttpResponder& res);
};

// Every request: API key, routing, ApiError/exception -> OpenAI error JSON, the request count.
void HttpServer::Impl::handle(const HttpRequest& req, HttpResponder& res) {
  try {
    // CORS: an allowed origin's responses, errors included, say so; its preflight requests
    // (which browsers send without credentials) are answered before the API key is checked.
    if (const std::string origin = cors_origin(req); !origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS" && !req.header("access-control-request-method").empty()) {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.send(204, "text/plain", "");
        metrics.record_http(req.path, 204);
        return;
      }
    }
    if (req.path != "/health" && !authorized(req)) {
      throw ApiError(401, "missing or invalid API key: send 'Authorization: Bearer KEY'",
                     "authentication_error", "", "invalid_api_key");
    }
    route(req, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {  // the engine refusing an input it was given
    send_error(res, invalid_request(e.what()));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  metrics.record_http(req.path, res.started() ? res.status() : 500);
}

void HttpServer::Impl::route(const HttpRequest& req, HttpResponder& res) {
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  const std::string& path = req.path;
  if (post && path == "/v1/completions") return generation(Endpoint::Completions, req, res);
  if (post && path == "/v1/chat/completions") {
    return generation(Endpoint::ChatCompletions, req, res);
  }
  if (post && (path == "/completion" || path == "/completions")) {
    return native(NativeEndpoint::Completion, req, res);
  }
  if (post && path == "/infill") return native(NativeEndpoint::Infill, req, res);
  if (post && path == "/tokenize") return tokenize(req, res);
  if (post && path == "/detokenize") return detokenize(req, res);
  if (get && path == "/health") {
    if (engine.load() == nullptr) {
      res.send(503, "application/json", R"({"status":"loading"})");
    } else if (draining.load()) {
      res.send(503, "application/json", R"({"status":"shutting down"})");
    } else {
      res.send(200, "application/json", R"({"status":"ok"})");
    }
    return;
  }
  if (get && path == "/v1/models") {
    ready_engine();
    res.send(200, "application/json", to_wire(models_json(config.model_id, created)));
    return;
  }
  if (get && path == "/metrics") {
    if (queue) metrics.set_queue_length(static_cast<int64_t>(queue->queued()));
    res.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics.render(listener.stats()));
    return;
  }
  // A known path with another method: 405; anything else: 404.
  const auto known = [&path](const std::vector<std::string>& paths) {
    return std::find(paths.begin(), paths.end(), path) != paths.end();
  };
  if (known(kGenerationPaths) || known(kGetPaths)) {
    res.set_header("Allow", known(kGenerationPaths) ? "POST" : "GET, HEAD");
    throw ApiError(405, str_cat("method ", req.method, " is not allowed on ", path),
                   "invalid_request_error", "", "method_not_allowed");
  }
  throw ApiError(404, str_cat("no such endpoint: ", req.method, " ", path), "not_found_error", "",
                 "unknown_url");
}

void HttpServer::Impl::generation(Endpoint endpoint, const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  const CompletionRequest r = parse_request(endpoint, req.body);
  check_model(r.model, model_ids);
  // The prompts' tokens: text as the server tokenizes prompts, token ids as given (checked
  // against the vocabulary); a chat request has one, its messages through the template.
  std::vector<EchoedPrompt> prompts;
  if (!r.suffix.empty() && !e.tokenizer().fim()) {
    throw invalid_request(
        "'suffix' needs a model with fill-in-the-middle tokens, and this one "
        "has none",
        "suffix", "unsupported_value");
  }
  if (endpoint == Endpoint::Completions) {
    const int32_t n_vocab = e.tokenizer().n_vocab();
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      const PromptInput& in = r.prompts[p];
      if (!r.suffix.empty()) {
        prompts.push_back({in.text, encode_fim_prompt(e.tokenizer(), in.text, r.suffix)});
        continue;
      }
      if (!in.tokens) {
        prompts.push_back({in.text, e.tokenize_prompt(in.text)});
        continue;
      }
      for (int32_t id : *in.tokens) {
        if (id >= n_vocab) {
          throw invalid_request(
              str_cat("prompt token id ", id, " is outside the vocabulary of ", n_vocab, " tokens"),
              r.prompts.size() == 1 ? "prompt" : str_cat("prompt[", p, "]"), "invalid_value");
        }
      }
      prompts.push_back({e.tokenizer().decode(*in.tokens), *in.tokens});
    }
  } else {
    std::vector<std::string> tools;
    for (const ToolSpec& t : r.tools.tools) tools.push_back(t.definition);
    const bool tool_turns = std::any_of(r.messages.begin(), r.messages.end(), [](const auto& m) {
      return m.role == "tool" || !m.tool_calls.empty();
    });
    if ((!tools.empty() || tool_turns) && !e.chat_template().supports_tools()) {
      throw invalid_request(
          str_cat("this model's chat template (", e.chat_template().name(),
                  ") has no tool-calling convention; tools work with Hermes-style templates "
                  "such as Qwen2.5's"),
          tools.empty() ? "messages" : "tools", "unsupported_value");
    }
    prompts.push_back({"", e.tokenize_prompt(e.chat_template().apply(r.messages, true, tools))});
  }
  std::vector<int32_t> max_tokens;
  for (const EchoedPrompt& p : prompts) {
    max_tokens.push_back(resolve_max_tokens(r, static_cast<int32_t>(p.tokens.size()), e.n_ctx()));
  }
  const GenerationOptions o = request_options(r, e);

  std::vector<std::vector<int32_t>> prompt_tokens;
  for (const EchoedPrompt& p : prompts) prompt_tokens.push_back(p.tokens);
  const std::vector<std::shared_ptr<Job>> jobs = submit_jobs(prompt_tokens, max_tokens, o, r);
  std::vector<EchoedPrompt> echoes;
  if (r.echo) {
    for (const EchoedPrompt& p : prompts) echoes.insert(echoes.end(), static_cast<size_t>(r.n), p);
  }
  ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.id = make_id(endpoint);
  meta.created = unix_now();
  meta.model = r.model.empty() ? config.model_id : r.model;
  for (const ToolSpec& t : r.tools.tools) meta.tool_names.push_back(t.name);
  if (r.logprobs >= 0) {
    meta.logprobs = LogprobFormat{&e.tokenizer(), r.ignore_eos, r.tokens_as_ids, r.logprobs};
  }
  const auto per_prompt = static_cast<size_t>(r.n);
  if (r.stream) return stream(jobs, meta, echoes, per_prompt, r.include_usage, res);

  if (!wait_all(jobs, res)) return;
  std::vector<GenerationResult> results;
  for (const auto& job : jobs) {
    if (job->failed()) throw ApiError(500, "generation failed: " + job->error(), "server_error");
    if (job->result().finish == FinishReason::Cancelled) throw shutting_down_error();
    results.push_back(job->result());
  }
  nlohmann::json doc = completion_json(meta, results, echoes, per_prompt);
  if (r.prompt_logprobs >= 0) {
    // vLLM's places: per choice for completions, once for the chat's one prompt.
    const auto of = [&](size_t i) {
      return prompt_logprobs_json(e.tokenizer(), prompts[i / per_prompt].tokens,
                                  results[i].prompt_logprobs, r.prompt_logprobs);
    };
    if (endpoint == Endpoint::Completions) {
      for (size_t i = 0; i < results.size(); ++i) doc["choices"][i]["prompt_logprobs"] = of(i);
    } else {
      doc["prompt_logprobs"] = of(0);
    }
  }
  res.send(200, "application/json", to_wire(doc));
}

GenerationOptions HttpServer::Impl::request_options(const CompletionRequest& r,
                                                    const Engine& e) const {
  GenerationOptions o;
  o.sampling.temperature = r.temperature;
  o.sampling.top_k = r.top_k;
  o.sampling.top_p = r.top_p;
  o.sampling.min_p = r.min_p;
  o.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  o.fixed_seed = r.seed.has_value();
  o.penalties = r.penalties;
  o.grammar = r.grammar;
  try {
    check_penalty_params(o.penalties, e.tokenizer().n_vocab());
  } catch (const Error& err) {
    throw invalid_request(err.what(), "logit_bias", "invalid_value");
  }
  o.stop = r.stop;
  o.ignore_eos = r.ignore_eos;
  for (int32_t id : r.stop_token_ids) {
    if (id >= e.tokenizer().n_vocab()) {
      throw invalid_request(str_cat("stop token id ", id, " is outside the vocabulary of ",
                                    e.tokenizer().n_vocab(), " tokens"),
                            "stop_token_ids", "invalid_value");
    }
  }
  o.stop_token_ids = r.stop_token_ids;
  o.min_tokens = r.min_tokens;
  o.speculative = r.speculative;
  o.draft_max =
      r.draft_max.value_or(o.sampling.greedy() ? config.greedy_draft_max : config.draft_max);
  o.draft_length = config.draft_length;
  o.draft_context = config.draft_context;
  o.hybrid = config.hybrid;
  o.logprobs = r.logprobs;
  // echo with logprobs, or prompt_logprobs: the prompt's own tokens are scored too (with the
  // larger of the two alternative counts; each response part shows its own).
  o.prompt_logprobs = std::max(r.echo ? r.logprobs : -1, r.prompt_logprobs);
  return o;
}

std::vector<std::shared_ptr<Job>> HttpServer::Impl::submit_jobs(
    const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& max_tokens,
    const GenerationOptions& o, const CompletionRequest& r) {
  // n choices per prompt are n sequences, each its own job (and slot): with several slots they
  // run side by side, and the ones that start together read their common prompt once. A seeded
  // request's choice i draws from seed + i, so each choice is what a request with that seed
  // would give. Prompt p's choice i is choice p * n + i.
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int32_t i = 0; i < r.n; ++i) {
      GenerationOptions oi = o;
      oi.max_tokens = max_tokens[p];
      if (r.seed) oi.sampling.seed = *r.seed + static_cast<uint64_t>(i);
      if (!r.seed && jobs.size() > 0) oi.sampling.seed = std::random_device{}();
      std::shared_ptr<Job> job = queue->submit(prompts[p], std::move(oi));
      if (!job) {
        for (const auto& submitted : jobs) submitted->cancel();
        if (draining.load()) throw shutting_down_error();
        throw ApiError(503,
                       str_cat("the server is busy: ", config.queue_size,
                               " requests are already waiting; retry later"),
                       "server_error", "", "queue_full");
      }
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

bool HttpServer::Impl::wait_all(const std::vector<std::shared_ptr<Job>>& jobs, HttpResponder& res) {
  std::string ignored;
  for (const auto& job : jobs) {
    while (!job->wait(ignored, kPollInterval)) {
      ignored.clear();
      if (res.peer_closed()) {
        cancel_jobs(jobs);  // the workers skip them or stop at their next token; nobody waits
        res.close_after();
        res.send(kClientClosed, "application/json", "");  // counted; the client never sees it
        return false;
      }
    }
    ignored.clear();
  }
  return true;
}

void HttpServer::Impl::native(NativeEndpoint endpoint, const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  if (draining.load()) throw shutting_down_error();
  NativeRequest r = parse_native_request(endpoint, req.body);
  check_model(r.base.model, model_ids);
  const Tokenizer& tok = e.tokenizer();
  const int32_t n_ctx = e.n_ctx();
  const int32_t n_vocab = tok.n_vocab();
  std::vector<std::vector<int32_t>> prompts;
  if (endpoint == NativeEndpoint::Infill) {
    if (!tok.fim()) {
      throw invalid_request(
          "infill needs a model with fill-in-the-middle tokens, and this one has none",
          "input_prefix", "unsupported_value");
    }
    // The room the generation gets: n_predict, or a quarter of the context without one.
    const int32_t reserve = r.n_predict >= 0 ? std::max(r.n_predict, 1) : std::max(1, n_ctx / 4);
    if (reserve >= n_ctx) {
      throw invalid_request(str_cat("n_predict ", r.n_predict, " leaves no room for a prompt in ",
                                    "the context of ", n_ctx, " tokens"),
                            "n_predict", "context_length_exceeded");
    }
    try {
      prompts.push_back(
          encode_infill_prompt(tok, r.infill, static_cast<size_t>(n_ctx - reserve)).tokens);
    } catch (const Error& err) {
      throw invalid_request(err.what(), "prompt", "context_length_exceeded");
    }
  } else {
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      std::vector<int32_t> ids;
      for (size_t k = 0; k < r.prompts[p].size(); ++k) {
        const NativePromptPiece& piece = r.prompts[p][k];
        if (piece.is_text) {
          // Text opening a prompt gets the BOS the vocabulary wants, as llama-server adds it.
          const std::vector<int32_t> t =
              k == 0 ? e.tokenize_prompt(piece.text) : tok.encode(piece.text, false, true);
          ids.insert(ids.end(), t.begin(), t.end());
          continue;
        }
        for (int32_t id : piece.ids) {
          if (id >= n_vocab) {
            throw invalid_request(str_cat("prompt token id ", id, " is outside the vocabulary of ",
                                          n_vocab, " tokens"),
                                  "prompt", "invalid_value");
          }
        }
        ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
      }
      prompts.push_back(std::move(ids));
    }
  }
  // n_predict past the context ends the text where the context does (truncated), as there.
  std::vector<int32_t> max_tokens;
  for (const std::vector<int32_t>& p : prompts) {
    const auto n = static_cast<int32_t>(p.size());
    if (n == 0) throw invalid_request("the prompt is empty", "prompt", "invalid_value");
    if (n >= n_ctx) {
      throw invalid_request(
          str_cat("the prompt has ", n, " tokens but the context holds ", n_ctx, " tokens"),
          "prompt", "context_length_exceeded");
    }
    // -1: the engine's own bound, the context (its finish then says so).
    max_tokens.push_back(r.n_predict < 0 || r.n_predict > n_ctx - n ? -1 : r.n_predict);
  }
  for (const auto& [text, bias] : r.text_bias) {
    for (int32_t id : tok.encode(text, false, false))
      r.base.penalties.logit_bias.emplace_back(id, bias);
  }
  GenerationOptions o = request_options(r.base, e);
  o.min_indent = r.n_indent;
  o.newline_time_limit_ms = r.t_max_predict_ms;
  const std::vector<std::shared_ptr<Job>> jobs = submit_jobs(prompts, max_tokens, o, r.base);

  NativeMeta meta;
  meta.model = r.base.model.empty() ? config.model_id : r.base.model;
  meta.tokenizer = &tok;
  meta.generation_settings = native_settings_json(r, o, n_ctx);
  // Whether a draft will propose: asked for, and a draft model loaded.
  meta.generation_settings["speculative"] = o.speculative && e.has_draft();
  const auto per_prompt = static_cast<size_t>(r.base.n);
  if (r.base.stream) return native_stream(jobs, prompts, per_prompt, meta, r, res);
  if (!wait_all(jobs, res)) return;
  nlohmann::json docs = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = *jobs[i];
    if (j.failed()) throw ApiError(500, "generation failed: " + j.error(), "server_error");
    if (j.result().finish == FinishReason::Cancelled) throw shutting_down_error();
    docs.push_back(
        select_response_fields(native_result_json(meta, j.result(), prompts[i / per_prompt], i,
                                                  r.return_tokens, r.n_probs, false),
                               r.response_fields));
  }
  // One prompt and one completion: the object itself; otherwise the array, as llama-server.
  res.send(200, "application/json", to_wire(docs.size() == 1 ? docs[0] : docs));
}

void HttpServer::Impl::native_stream(const std::vector<std::shared_ptr<Job>>& jobs,
                                     const std::vector<std::vector<int32_t>>& prompts,
                                     size_t per_prompt, const NativeMeta& meta,
                                     const NativeRequest& r, HttpResponder& res) {
  if (!begin_event_stream(res, jobs)) return;
  std::vector<bool> ended(jobs.size(), false);
  size_t open = jobs.size();
  std::vector<TokenLogprob> logprobs;
  const milliseconds poll = jobs.size() == 1 ? kPollInterval : milliseconds(5);
  while (open > 0) {
    bool any_text = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (ended[i]) continue;
      std::string text;
      logprobs.clear();
      const bool done = jobs[i]->wait(text, poll, r.n_probs > 0 ? &logprobs : nullptr);
      bool ok = true;
      if (!text.empty()) {
        any_text = true;
        const nlohmann::json probs =
            r.n_probs > 0 ? native_probs_json(*meta.tokenizer, logprobs) : nlohmann::json();
        ok = res.write(sse_event(native_chunk_json(text, i, probs)));
      }
      if (ok && done) {
        const Job& j = *jobs[i];
        if (j.failed()) {
          ok = res.write(sse_event(
              error_json(ApiError(500, "generation failed: " + j.error(), "server_error"))));
        } else if (j.result().finish == FinishReason::Cancelled) {
          ok = res.write(sse_event(error_json(shutting_down_error())));
        } else {
          ok = res.write(sse_event(native_result_json(meta, j.result(), prompts[i / per_prompt], i,
                                                      r.return_tokens, r.n_probs, true)));
        }
        ended[i] = true;
        --open;
      }
      if (!ok) {
        cancel_jobs(jobs);
        return;
      }
    }
    if (!any_text && open > 0 && res.peer_closed()) {
      cancel_jobs(jobs);
      res.close_after();
      return;
    }
  }
  res.end_stream();  // llama-server's own stream ends without a [DONE] line
}

// The ids the completions or chat endpoint would feed the model for this input (for logit_bias,
// counting, or checking a prompt against the context), in the shape both llama-server's and
// vLLM's clients read: tokens, count, max_model_len.
void HttpServer::Impl::tokenize(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  const TokenizeRequest r = parse_tokenize(req.body);
  check_model(r.model, model_ids);
  const std::string text = r.chat ? e.chat_template().apply(r.messages, true) : r.text;
  const std::vector<int32_t> tokens =
      text.empty() ? std::vector<int32_t>{} : e.tokenize_prompt(text);
  nlohmann::json doc = {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", e.n_ctx()}};
  if (r.with_pieces) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : tokens)
      pieces.push_back({{"id", id}, {"piece", e.tokenizer().token_bytes(id)}});
    doc["pieces"] = std::move(pieces);
  }
  res.send(200, "application/json", to_wire(doc));
}

void HttpServer::Impl::detokenize(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  const DetokenizeRequest r = parse_detokenize(req.body);
  check_model(r.model, model_ids);
  const int32_t n_vocab = e.tokenizer().n_vocab();
  for (int32_t id : r.tokens) {
    if (id >= n_vocab) {
      throw invalid_request(
          str_cat("token id ", id, " is outside the vocabulary of ", n_vocab, " tokens"), "tokens",
          "invalid_value");
    }
  }
  const std::string text = e.tokenizer().decode(r.tokens);
  res.send(200, "application/json", to_wire(nlohmann::json{{"content", text}, {"prompt", text}}));
}

void HttpServer::Impl::stream(const std::vector<std::shared_ptr<Job>>& jobs,
                              const ResponseMeta& meta, std::span<const EchoedPrompt> echoes,
                              size_t choices_per_prompt, bool include_usage, HttpResponder& res) {
  if (!begin_event_stream(res, jobs)) return;
  auto write = [&res](const std::string& s) { return res.write(s); };
  // Per choice: whether its first chunk went out, the bytes of text sent (the completions
  // format's text offsets), whether it has ended (its final chunk sent), and with echo whether
  // its prompt went out yet and the logprob entries held until it does.
  struct Choice {
    bool first = true, ended = false, echo_pending = false;
    size_t text_bytes = 0;
    std::vector<TokenLogprob> held;
    // With tools: the whole reply so far and how much of it went out as content; from a
    // "<tool_call>" on it is held until the end, when the calls go out whole.
    std::string reply;
    size_t reply_sent = 0;
    std::vector<TokenLogprob> reply_logprobs;  // of text not sent yet
  };
  const bool tools = !meta.tool_names.empty();
  std::vector<Choice> choices(jobs.size());
  // The echoed prompt goes first, as its own chunk. Without logprobs it is known now; with them
  // it waits for the prompt's entries, which the engine sends before any text (the first
  // prompt_tokens - 1 entries a choice receives).
  const auto send_echo = [&](size_t i, std::span<const TokenLogprob> entries) {
    Choice& c = choices[i];
    c.echo_pending = false;
    c.text_bytes = echoes[i].text.size();
    const nlohmann::json lp =
        meta.logprobs ? echo_logprobs_json(meta, echoes[i], entries) : nlohmann::json();
    if (write(sse_event(
            text_chunk_json(meta, echoes[i].text, c.first, lp, static_cast<int32_t>(i))))) {
      c.first = false;
      return true;
    }
    return false;
  };
  for (size_t i = 0; i < echoes.size(); ++i) {
    choices[i].echo_pending = true;
    if (!meta.logprobs && !send_echo(i, {})) {
      cancel_jobs(jobs);
      return;
    }
  }
  std::vector<TokenLogprob> logprobs;
  size_t open = jobs.size();
  // One choice waits as a single request does; with several, each is polled briefly in turn so
  // that none waits behind another's silence.
  const milliseconds poll = jobs.size() == 1 ? kPollInterval : milliseconds(5);
  while (open > 0) {
    bool any_text = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Choice& c = choices[i];
      if (c.ended) continue;
      std::string text;
      logprobs.clear();
      const bool done = jobs[i]->wait(text, poll, meta.logprobs ? &logprobs : nullptr);
      const auto index = static_cast<int32_t>(i);
      if (c.echo_pending) {
        c.held.insert(c.held.end(), logprobs.begin(), logprobs.end());
        logprobs.clear();
        const size_t n_prompt = echoes[i].tokens.size() - 1;
        if (c.held.size() >= n_prompt) {
          if (!send_echo(i, std::span<const TokenLogprob>(c.held).first(n_prompt))) {
            cancel_jobs(jobs);
            return;
          }
          logprobs.assign(c.held.begin() + static_cast<std::ptrdiff_t>(n_prompt), c.held.end());
          c.held.clear();
        }
      }
      if (tools && (!text.empty() || !logprobs.empty())) {
        any_text = any_text || !text.empty();
        c.reply += text;
        c.reply_logprobs.insert(c.reply_logprobs.end(), logprobs.begin(), logprobs.end());
        logprobs.clear();
        const size_t can = streamable_content(c.reply);
        if (can > c.reply_sent) {
          const nlohmann::json lp =
              meta.logprobs ? logprobs_json(meta, c.reply_logprobs, 0) : nlohmann::json();
          if (!write(sse_event(text_chunk_json(
                  meta, std::string_view(c.reply).substr(c.reply_sent, can - c.reply_sent), c.first,
                  lp, index)))) {
            cancel_jobs(jobs);
            return;
          }
          c.first = false;
          c.reply_sent = can;
          c.reply_logprobs.clear();
        }
        text.clear();
      }
      if (!text.empty()) {
        any_text = true;
        const nlohmann::json lp =
            meta.logprobs ? logprobs_json(meta, logprobs, c.text_bytes) : nlohmann::json();
        c.text_bytes += text.size();
        if (!write(sse_event(text_chunk_json(meta, text, c.first, lp, index)))) {
          cancel_jobs(jobs);
          return;
        }
        c.first = false;
        logprobs.clear();  // sent with this chunk
      }
      if (!done) continue;
      const Job& j = *jobs[i];
      bool ok = true;
      if (j.failed()) {
        ok = write(sse_event(
            error_json(ApiError(500, "generation failed: " + j.error(), "server_error"))));
      } else if (j.result().finish == FinishReason::Cancelled) {
        ok = write(sse_event(error_json(shutting_down_error())));
      } else {
        bool called = false;
        if (tools) {
          // The held rest of the reply: its calls, or (none parsed) the text itself.
          const SplitReply reply =
              split_tool_calls(c.reply, meta.tool_names, tool_call_seed(meta, i));
          const nlohmann::json lp = meta.logprobs && !c.reply_logprobs.empty()
                                        ? logprobs_json(meta, c.reply_logprobs, 0)
                                        : nlohmann::json();
          if (!reply.calls.empty()) {
            called = true;
            ok = write(sse_event(tool_calls_chunk_json(meta, reply.calls, c.first, lp, index)));
          } else if (c.reply_sent < c.reply.size()) {
            ok = write(sse_event(text_chunk_json(
                meta, std::string_view(c.reply).substr(c.reply_sent), c.first, lp, index)));
          }
          c.first = false;
          logprobs.clear();
        }
        // Logprobs that came after the last text (the end-of-generation token's are dropped).
        const nlohmann::json lp = meta.logprobs && !logprobs.empty()
                                      ? logprobs_json(meta, logprobs, c.text_bytes)
                                      : nlohmann::json();
        ok = ok && write(sse_event(final_chunk_json(meta, j.result(), lp, index, called)));
      }
      if (!ok) {
        cancel_jobs(jobs);
        return;
      }
      c.ended = true;
      --open;
    }
    if (!any_text && open > 0 && res.peer_closed()) {
      cancel_jobs(jobs);
      res.close_after();
      return;
    }
  }
  bool ok = true;
  if (include_usage) {
    std::vector<GenerationResult> results;
    for (const auto& job : jobs) {
      if (!job->failed()) results.push_back(job->result());
    }
    ok = write(sse_event(usage_chunk_json(meta, combined_stats(results, choices_per_prompt))));
  }
  ok = ok && write(std::string(kSseDone));
  if (ok) {
    res.end_stream();
  } else {
    cancel_jobs(jobs);
  }
}

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::attach(Engine& engine) {
  if (impl_->engine.load() != nullptr) fail("HttpServer::attach: an engine is already attached");
  impl_->queue = std::make_unique<GenerationQueue>(
      [&engine](std::span<const int32_t> prompt, const GenerationOptions& o, const TextCallback& cb,
                const LogprobCallback& lp,
                int32_t slot) { return engine.generate(prompt, o, cb, lp, slot); },
      impl_->config.queue_size, impl_->metrics, engine.n_slots(),
      [&engine](int32_t slot, std::span<const int32_t> prompt) -> size_t {
        const std::vector<int32_t> history = engine.slot_history(slot);
        size_t n = 0;
        while (n < history.size() && n < prompt.size() && history[n] == prompt[n]) ++n;
        // A prompt that continues most of what the slot holds (a follow-up turn) reuses it; one
        // that shares only a little (a common system prompt) would destroy the rest of that
        // cache for a small gain, so it counts as no match and takes the stalest slot
        // (llama-server's --slot-prompt-similarity 0.5 is the same idea).
        return 2 * n >= history.size() ? n : 0;
      });
  impl_->metrics.set_slots(engine.n_slots());
  if (engine.n_slots() > 1) {
    Metrics& m = impl_->metrics;
    engine.set_pass_observer([&m](bool target, int64_t rows, int64_t sequences) {
      if (target) m.observe_target_pass(rows, sequences);
    });
  }
  impl_->engine.store(&engine, std::memory_order_release);
}

int HttpServer::bind() { return impl_->listener.bind(); }

void HttpServer::run() {
  impl_->listener.run();
  std::unique_lock lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [this] { return impl_->stopped; });
}

void HttpServer::stop() {
  // Generations first: connection threads waiting on them then answer and return, so that
  // closing the connections (which joins those threads) cannot hang.
  impl_->draining = true;
  impl_->listener.stop_accepting();
  if (impl_->queue) impl_->queue->shutdown();
  // A moment for the threads of cancelled requests to tell their clients why (a 503, a stream's
  // error event) and for idle connections to close; then whatever is left is cut.
  impl_->listener.wait_until_closed(kStopWriteGrace);
  impl_->listener.close_all();
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopped = true;
  }
  impl_->stop_cv.notify_all();
}

bool HttpServer::drain(std::chrono::milliseconds grace) {
  impl_->draining = true;
  impl_->listener.stop_accepting();
  const bool clean = impl_->listener.wait_until_closed(grace);
  stop();
  return clean;
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
