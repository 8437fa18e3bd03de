// The HTTP server's shared state and the handlers' declarations, for the files that implement
// them: http_server.cpp (routing, authentication, errors, the queue, /tokenize), openai_routes.cpp
// (/v1/completions, /v1/chat/completions), native_routes.cpp (llama-server's /completion and
// /infill), anthropic_routes.cpp (/v1/messages), responses_routes.cpp (/v1/responses),
// ollama_routes.cpp (/api/*), embeddings_routes.cpp (/v1/embeddings, /embedding, /api/embed)
// and slots_routes.cpp (POST /slots/{id}).
// Not part of the server's interface.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server/embeddings_api.h"
#include "server/generation_queue.h"
#include "server/http_listener.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/native_api.h"
#include "server/ollama_api.h"
#include "server/openai_format.h"
#include "server/reasoning.h"
#include "server/request_parsing.h"
#include "server/responses_api.h"
#include "server/slot_actions.h"

namespace specdec::server {

// How often a waiting connection thread checks that its client is still there.
inline constexpr std::chrono::milliseconds kPollInterval{50};
// nginx's "client closed request": logged and counted, never seen by the (absent) client.
inline constexpr int kClientClosed = 499;

int64_t unix_now();
ApiError loading_error();
ApiError shutting_down_error();
void cancel_jobs(const std::vector<std::shared_ptr<Job>>& jobs);
// Starts a streamed response (server-sent events, or another content type such as Ollama's
// newline-delimited JSON); false (the jobs cancelled) when that failed.
bool begin_event_stream(HttpResponder& res, const std::vector<std::shared_ptr<Job>>& jobs,
                        const char* content_type = "text/event-stream");
// A thinking model's reasoning, split off a relayed reply before its text is: `send` gets each
// piece of the reasoning as it comes (server/reasoning.h); `opened`: the reply starts inside the
// block (ReasoningMode::opened).
struct ReasoningRelay {
  bool opened = false;
  std::function<bool(std::string_view)> send;
};
// Relays one job's text as it comes: `send_text` gets each piece that may go out (with
// `hold_calls`, what may still become tool calls is held back: streamable_content); `sent` is
// how much of the reply it got; with `logprobs`, the entries of the tokens behind the text
// received so far are appended there before send_text (or reasoning->send) sees it. With
// `reasoning`, a leading reasoning block goes to reasoning->send and the reply is what follows
// it. Returns the whole reply once the job is done, or nullopt when the client left or a send
// failed (the job is then cancelled).
std::optional<std::string> relay_text(const std::shared_ptr<Job>& job, bool hold_calls,
                                      HttpResponder& res,
                                      const std::function<bool(std::string_view)>& send_text,
                                      size_t& sent, std::vector<TokenLogprob>* logprobs = nullptr,
                                      const ReasoningRelay* reasoning = nullptr);
// Why a finished job has no result to send (it failed, or the server stopped it); nullopt when
// it has one.
std::optional<ApiError> job_error(const Job& job);
// A chat request's prompt text: its turns and tools through the model's chat template, the
// assistant turn opened (unless add_generation_prompt is off) and holding the prefill. 400 when
// tools or tool turns meet a template without a tool-calling convention.
std::string chat_prompt_text(const CompletionRequest& r, const Engine& e);
// How a request's replies split into reasoning and content: a chat request's do when the
// model's template thinks (ChatTemplate::thinking()) and its reasoning_format is not none,
// starting inside the block when the prefill leaves a <think> block open. (whole_content, for
// deepseek-legacy, is set by OpenAI's routes alone: the other APIs have a field of their own for
// the reasoning.)
ReasoningMode reasoning_mode(const CompletionRequest& r, const Engine& e);

struct HttpServer::Impl {
  explicit Impl(ServerConfig c);

  ServerConfig config;
  Metrics metrics;  // declared before the queue, which records into it
  std::atomic<Engine*> engine{nullptr};
  std::unique_ptr<GenerationQueue> queue;  // created by attach()
  std::atomic<bool> draining{false};
  std::vector<std::string> model_ids;
  ModelFacts facts;  // set by attach(), before the engine is published
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

  // "Authorization: Bearer KEY", or Anthropic's "x-api-key: KEY".
  // Every key is compared, whichever matches, so that the time taken does not tell which one did.
  bool authorized(const HttpRequest& req) const {
    if (config.api_keys.empty()) return true;
    const std::string_view bearer = req.header("authorization");
    const std::string_view plain = req.header("x-api-key");
    bool ok = false;
    for (const std::string& key : config.api_keys) {
      ok |= (!bearer.empty() && same_secret(bearer, "Bearer " + key)) ||
            (!plain.empty() && same_secret(plain, key));
    }
    return ok;
  }

  // Constant-time comparison: the key must not leak through response timing.
  static bool same_secret(std::string_view got, const std::string& want) {
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
  // Whether a request with these options speculates: it asks to, and its drafter is there (a
  // draft model loaded, or prompt lookup, which needs none).
  static bool drafts(const GenerationOptions& o, const Engine& e) {
    return o.speculative && (o.drafter == DrafterKind::Ngram || e.has_draft());
  }
  // Each prompt's n choices as jobs (choice i of prompt p at p * n + i); 503 when the queue is
  // full (what was submitted is cancelled).
  std::vector<std::shared_ptr<Job>> submit_jobs(const std::vector<std::vector<int32_t>>& prompts,
                                                const std::vector<int32_t>& max_tokens,
                                                const GenerationOptions& o,
                                                const CompletionRequest& r, int32_t per_prompt = 0);
  // Waits for every job; false (the jobs cancelled, a 499 logged) when the client left.
  bool wait_all(const std::vector<std::shared_ptr<Job>>& jobs, HttpResponder& res);
  void tokenize(const HttpRequest& req, HttpResponder& res);
  // llama-server's GET /props, GET /slots and POST /apply-template (native_routes.cpp).
  void props(const HttpRequest& req, HttpResponder& res);
  void apply_template(const HttpRequest& req, HttpResponder& res);
  void detokenize(const HttpRequest& req, HttpResponder& res);
  // llama-server's POST /slots/{id}?action=save|restore|erase (server/slot_actions.h;
  // slots_routes.cpp).
  void slot_action(const HttpRequest& req, HttpResponder& res);
  void stream(const std::vector<std::shared_ptr<Job>>& jobs, const ResponseMeta& meta,
              std::span<const EchoedPrompt> echoes, size_t choices_per_prompt, bool include_usage,
              HttpResponder& res);
  // Anthropic's Messages API (server/anthropic_api.h; anthropic_routes.cpp).
  void messages(const HttpRequest& req, HttpResponder& res);
  void messages_stream(const std::shared_ptr<Job>& job, const MessagesMeta& meta,
                       int32_t prompt_tokens, HttpResponder& res);
  void count_tokens(const HttpRequest& req, HttpResponder& res);
  // OpenAI's Responses API (server/responses_api.h; responses_routes.cpp).
  void responses(const HttpRequest& req, HttpResponder& res);
  void responses_stream(const std::shared_ptr<Job>& job, const ResponsesMeta& meta,
                        HttpResponder& res);
  // Ollama's API (server/ollama_api.h; ollama_routes.cpp): /api/chat (chat true) and
  // /api/generate; /api/tags, /api/ps, /api/version and /api/show.
  void ollama_generation(bool chat, const HttpRequest& req, HttpResponder& res);
  void ollama_stream(const std::shared_ptr<Job>& job, const OllamaMeta& meta,
                     const CompletionRequest& r, const std::vector<int32_t>& prompt,
                     bool with_context, std::chrono::steady_clock::time_point start,
                     HttpResponder& res);
  void ollama_info(const HttpRequest& req, HttpResponder& res);
  // Embeddings in OpenAI's, llama-server's and Ollama's shapes (server/embeddings_api.h;
  // embeddings_routes.cpp).
  void embeddings(EmbeddingApi api, const HttpRequest& req, HttpResponder& res);
  // 404 in Ollama's wording unless `sent` (with or without ":latest") names the served model.
  void check_ollama_model(const std::string& sent) const;
};

}  // namespace specdec::server
