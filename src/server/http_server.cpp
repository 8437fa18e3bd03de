#include "server/http_server.h"

#include <algorithm>
#include <random>

#include "common/error.h"
#include "server/http_server_impl.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// stop(): how long cancelled requests may take to write their last words before connections
// are cut.
constexpr milliseconds kStopWriteGrace{1000};

const std::vector<std::string> kGenerationPaths = {"/v1/completions", "/v1/chat/completions",
                                                   "/completion",     "/completions",
                                                   "/infill",         "/tokenize",
                                                   "/detokenize",     "/apply-template",
                                                   "/v1/messages",    "/v1/messages/count_tokens",
                                                   "/v1/responses",   "/api/chat",
                                                   "/api/generate",   "/api/show",
                                                   "/v1/embeddings",  "/embedding",
                                                   "/embeddings",     "/api/embed",
                                                   "/api/embeddings"};
const std::vector<std::string> kGetPaths = {"/v1/models", "/health", "/metrics",     "/",
                                            "/api/tags",  "/api/ps", "/api/version", "/props",
                                            "/slots"};
// Ollama's endpoints this server does not serve: it serves one model, loaded at start (no
// model management).
const std::vector<std::string> kOllamaUnserved = {"/api/pull", "/api/push", "/api/create",
                                                  "/api/copy", "/api/delete"};

// Anthropic's endpoints answer errors in Anthropic's shape, Ollama's in Ollama's, the others in
// OpenAI's.
enum class ErrorShape { OpenAI, Anthropic, Ollama };
ErrorShape error_shape(const std::string& path) {
  if (path.starts_with("/v1/messages")) return ErrorShape::Anthropic;
  if (path.starts_with("/api/")) return ErrorShape::Ollama;
  return ErrorShape::OpenAI;
}

void send_error(HttpResponder& res, const ApiError& e, ErrorShape shape) {
  if (res.started()) return;
  const json doc = shape == ErrorShape::Anthropic ? anthropic_error_json(e)
                   : shape == ErrorShape::Ollama  ? ollama_error_json(e)
                                                  : error_json(e);
  res.send(e.status(), "application/json", to_wire(doc));
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

}  // namespace

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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

bool begin_event_stream(HttpResponder& res, const std::vector<std::shared_ptr<Job>>& jobs,
                        const char* content_type) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  if (res.begin_stream(200, content_type)) return true;
  cancel_jobs(jobs);
  return false;
}

std::optional<std::string> relay_text(const std::shared_ptr<Job>& job, bool hold_calls,
                                      HttpResponder& res,
                                      const std::function<bool(std::string_view)>& send_text,
                                      size_t& sent, std::vector<TokenLogprob>* logprobs,
                                      const ReasoningRelay* reasoning) {
  std::optional<ReasoningStream> split;
  if (reasoning != nullptr) split.emplace(reasoning->opened);
  std::string reply;
  for (bool done = false; !done;) {
    std::string text;
    done = job->wait(text, kPollInterval, logprobs);
    if (split) {
      // The reasoning goes out first; only what follows the block is the reply.
      ReasoningSplit piece = split->push(text);
      if (done) {
        ReasoningSplit rest = split->finish();
        piece.reasoning += rest.reasoning;
        piece.content += rest.content;
      }
      if (!piece.reasoning.empty() && !reasoning->send(piece.reasoning)) {
        job->cancel();
        return std::nullopt;
      }
      text = std::move(piece.content);
    }
    if (text.empty()) {
      if (!done && res.peer_closed()) {
        job->cancel();
        res.close_after();
        return std::nullopt;
      }
      continue;
    }
    reply += text;
    const size_t can = hold_calls ? streamable_content(reply) : reply.size();
    if (can > sent) {
      if (!send_text(std::string_view(reply).substr(sent, can - sent))) {
        job->cancel();
        return std::nullopt;
      }
      sent = can;
    }
  }
  return reply;
}

std::optional<ApiError> job_error(const Job& job) {
  if (job.failed()) return ApiError(500, "generation failed: " + job.error(), "server_error");
  if (job.result().finish == FinishReason::Cancelled) return shutting_down_error();
  return std::nullopt;
}

std::string chat_prompt_text(const CompletionRequest& r, const Engine& e) {
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
  // A prefill continues the assistant turn the template opens.
  return e.chat_template().apply(r.messages, r.add_generation_prompt, tools,
                                 r.enable_thinking.value_or(true)) +
         r.prefill;
}

ReasoningMode reasoning_mode(const CompletionRequest& r, const Engine& e) {
  const size_t open = r.prefill.rfind(kThinkOpen);
  return {r.endpoint == Endpoint::ChatCompletions && e.chat_template().thinking() &&
              r.reasoning_format != ReasoningFormat::None,
          open != std::string::npos && r.prefill.find(kThinkClose, open) == std::string::npos};
}

HttpServer::Impl::Impl(ServerConfig c)
    : config(std::move(c)),
      model_ids{[this] {
        std::vector<std::string> ids{config.model_id, "specdec"};
        ids.insert(ids.end(), config.other_model_ids.begin(), config.other_model_ids.end());
        return ids;
      }()},
      created(unix_now()),
      id_salt(std::random_device{}()),
      listener(
          listener_config(config),
          [this](const HttpRequest& req, HttpResponder& res) { handle(req, res); },
          [this](int status, const std::string& message) {
            metrics.record_http("", status);
            return transport_error_body(status, message);
          }) {}

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
        res.set_header("Access-Control-Allow-Headers",
                       "Authorization, Content-Type, X-Api-Key, Anthropic-Version");
        res.set_header("Access-Control-Max-Age", "600");
        res.send(204, "text/plain", "");
        metrics.record_http(req.path, 204);
        return;
      }
    }
    if (req.path != "/health" && !authorized(req)) {
      throw ApiError(401,
                     "missing or invalid API key: send 'Authorization: Bearer KEY' (or, "
                     "Anthropic's form, 'x-api-key: KEY')",
                     "authentication_error", "", "invalid_api_key");
    }
    route(req, res);
  } catch (const ApiError& e) {
    send_error(res, e, error_shape(req.path));
  } catch (const Error& e) {  // the engine refusing an input it was given
    send_error(res, invalid_request(e.what()), error_shape(req.path));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"),
               error_shape(req.path));
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
  if (post && path == "/v1/messages") return messages(req, res);
  if (post && path == "/v1/responses") return responses(req, res);
  if (post && path == "/v1/messages/count_tokens") return count_tokens(req, res);
  if (post && path == "/api/chat") return ollama_generation(/*chat=*/true, req, res);
  if (post && path == "/api/generate") return ollama_generation(/*chat=*/false, req, res);
  if (post && path == "/v1/embeddings") return embeddings(EmbeddingApi::OpenAI, req, res);
  if (post && (path == "/embedding" || path == "/embeddings")) {
    return embeddings(EmbeddingApi::Native, req, res);
  }
  if (post && path == "/api/embed") return embeddings(EmbeddingApi::Ollama, req, res);
  if (post && path == "/api/embeddings") return embeddings(EmbeddingApi::OllamaLegacy, req, res);
  if ((get && (path == "/api/tags" || path == "/api/ps" || path == "/api/version")) ||
      (post && path == "/api/show")) {
    return ollama_info(req, res);
  }
  if (get && path == "/") {
    // Ollama's clients probe the root to find a server.
    res.send(200, "text/plain; charset=utf-8", "specdec is running (Ollama-compatible API)");
    return;
  }
  if (std::find(kOllamaUnserved.begin(), kOllamaUnserved.end(), path) != kOllamaUnserved.end() ||
      path.starts_with("/api/blobs/")) {
    throw ApiError(501,
                   str_cat(path, " is not served: this server runs the one model it was ",
                           "started with (no model management)"),
                   "server_error", "", "not_implemented");
  }
  if (post && path == "/tokenize") return tokenize(req, res);
  if (slot_path_id(path)) {
    if (post) return slot_action(req, res);
    res.set_header("Allow", "POST");
    throw ApiError(405, str_cat("method ", req.method, " is not allowed on ", path),
                   "invalid_request_error", "", "method_not_allowed");
  }
  if (get && (path == "/props" || path == "/slots")) return props(req, res);
  if (path == "/lora-adapters" && (get || post)) {
    Engine& e = ready_engine();
    if (post) {
      // The scales requests that give none run at from now on, set llama-server's way: the body
      // is an array ([{"id": 0, "scale": 1.0}, ...]), not an object, and an adapter it leaves
      // out goes to 0. Requests already running keep theirs.
      const std::vector<float> scales = lora_scales_of(
          parse_lora_entries(parse_json_value(req.body), "body"), e.target_lora().size(), "body");
      e.set_lora_scales(scales);
      res.send(200, "application/json", R"({"success":true})");
      return;
    }
    res.send(200, "application/json",
             to_wire(lora_adapters_json(e.target_lora(), e.lora_scales())));
    return;
  }
  if (post && path == "/apply-template") return apply_template(req, res);
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

GenerationOptions HttpServer::Impl::request_options(const CompletionRequest& r,
                                                    const Engine& e) const {
  GenerationOptions o;
  o.sampling = r.sampling;
  o.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  o.fixed_seed = r.seed.has_value();
  o.penalties = r.penalties;
  // An empty list asks for nothing: the default scales as they are now (POST /lora-adapters may
  // change them while the request waits), as llama-server's params_from_json_cmpl copies them.
  o.lora_scales =
      r.lora.empty() ? e.lora_scales() : lora_scales_of(r.lora, e.target_lora().size(), "lora");
  o.grammar = r.grammar;
  o.grammar_trigger = r.grammar_trigger;
  o.reasoning_budget = r.reasoning_budget;
  o.reasoning_budget_message = r.reasoning_budget_message;
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
  if (r.draft_p_min) o.draft_length.p_min = *r.draft_p_min;
  if (r.draft_min) o.draft_length.min_drafts = *r.draft_min;
  o.draft_context = config.draft_context;
  o.hybrid = config.hybrid;
  o.ngram = config.ngram;
  if (config.lookup_only) o.drafter = DrafterKind::Ngram;
  o.logprobs = r.logprobs;
  // echo with logprobs, or prompt_logprobs: the prompt's own tokens are scored too (with the
  // larger of the two alternative counts; each response part shows its own).
  o.prompt_logprobs = std::max(r.echo ? r.logprobs : -1, r.prompt_logprobs);
  return o;
}

std::vector<std::shared_ptr<Job>> HttpServer::Impl::submit_jobs(
    const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& max_tokens,
    const GenerationOptions& o, const CompletionRequest& r, int32_t per_prompt) {
  // per_prompt (0: n) sequences per prompt, each its own job (and slot): with several slots they
  // run side by side, and the ones that start together read their common prompt once. A seeded
  // request's sequence i draws from seed + i, so each is what a request with that seed would
  // give. Prompt p's sequence i is job p * per_prompt + i.
  if (per_prompt == 0) per_prompt = r.n;
  if (r.id_slot >= queue->n_slots()) {
    throw invalid_request(str_cat("Invalid slot ID: id_slot ", r.id_slot, " but the server has ",
                                  queue->n_slots(), " slots (-1: any)"),
                          "id_slot");
  }
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int32_t i = 0; i < per_prompt; ++i) {
      GenerationOptions oi = o;
      oi.max_tokens = max_tokens[p];
      if (r.seed) oi.sampling.seed = *r.seed + static_cast<uint64_t>(i);
      if (!r.seed && jobs.size() > 0) oi.sampling.seed = std::random_device{}();
      std::shared_ptr<Job> job = queue->submit(prompts[p], std::move(oi), r.id_slot);
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

// The ids the completions or chat endpoint would feed the model for this input (for logit_bias,
// counting, or checking a prompt against the context), in the shape both llama-server's and
// vLLM's clients read: tokens, count, max_model_len.
void HttpServer::Impl::tokenize(const HttpRequest& req, HttpResponder& res) {
  Engine& e = ready_engine();
  const TokenizeRequest r = parse_tokenize(req.body);
  check_model(r.model, model_ids);
  const std::string text =
      r.chat ? e.chat_template().apply(r.messages, r.add_generation_prompt) + r.prefill : r.text;
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

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::attach(Engine& engine, ModelFacts facts) {
  if (impl_->engine.load() != nullptr) fail("HttpServer::attach: an engine is already attached");
  if (facts.name.empty()) {
    facts.name = impl_->config.model_id;
    facts.tools = engine.chat_template().supports_tools();
    facts.insert = engine.tokenizer().fim().has_value();
    facts.thinking = engine.chat_template().thinking();
  }
  facts.context = engine.n_ctx();
  impl_->facts = std::move(facts);
  impl_->queue = std::make_unique<GenerationQueue>(
      [&engine](std::span<const int32_t> prompt, const GenerationOptions& o, const TextCallback& cb,
                const LogprobCallback& lp,
                int32_t slot) { return engine.generate(prompt, o, cb, lp, slot); },
      impl_->config.queue_size, impl_->metrics, engine.n_slots(),
      [&engine](int32_t slot, std::span<const int32_t> prompt,
                const GenerationOptions& o) -> size_t {
        const std::vector<int32_t> history = engine.slot_history(slot);
        const size_t n = engine.reusable_prefix(slot, prompt, o.lora_scales);
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

}  // namespace specdec::server
