// The HTTP front end: routes, API-key check, error mapping and response streaming, over our
// own bounded HTTP/1.1 transport (http_listener.h). Generation itself happens on the
// GenerationQueue's workers (one per engine slot); connection threads validate, tokenize (the
// tokenizer is immutable and thread-safe), enqueue and wait.
//
//   OpenAI:       POST /v1/completions, /v1/chat/completions, /v1/responses   (stream or not)
//   llama-server: POST /completion (/completions), POST /infill, /tokenize, /detokenize
//   Anthropic:    POST /v1/messages, POST /v1/messages/count_tokens
//   GET /v1/models, GET /health (never needs the key), GET /metrics (Prometheus text)
//
// The server listens before the models are loaded: until attach(), /health answers 503
// {"status":"loading"} and generation requests 503, so that a load balancer or an orchestrator
// can tell "starting" from "down".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/model_facts.h"
#include "server/request_defaults.h"

namespace specdec::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() returns it)
  // Any one of these keys authorizes a request (llama-server's --api-key list and
  // --api-key-file); none: no authentication.
  std::vector<std::string> api_keys;
  // Origins whose browser pages may call the API (CORS: Access-Control-Allow-Origin on their
  // responses, and preflight OPTIONS requests answered without the API key); "*": any. Empty:
  // no CORS headers, so browsers keep other sites' pages from reading the responses.
  std::vector<std::string> allowed_origins;
  size_t queue_size = 16;
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 64;                        // more get 503 at once
  std::chrono::milliseconds request_timeout{20'000};  // a request's head + body (slowloris)
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{15'000};  // a client that stops reading
  std::string model_id;  // the target GGUF file's stem or --alias; "specdec" is always accepted too
  // Names a request's "model" may also give (the file's stem when --alias names the model).
  std::vector<std::string> other_model_ids;
  int32_t draft_max = 5;           // γ when a request does not say
  int32_t greedy_draft_max = 5;    // the same for a greedy request (temperature 0)
  DraftLengthParams draft_length;  // fixed γ or the adaptive rule (engine.h)
  int32_t draft_context = 0;       // GenerationOptions::draft_context
  bool hybrid = false;             // prompt lookup first, the draft model otherwise (engine.h)
  // Draft by prompt lookup alone, no draft model (llama-server's --spec-type ngram-*):
  // GenerationOptions::drafter Ngram with the default lookup settings.
  bool lookup_only = false;
  NgramParams ngram;  // the lookup's settings, hybrid or alone (--ngram-max, --ngram-policy, ...)
  // How the embedding endpoints pool a text's token states (engine/embedding.h); nullopt: as the
  // model's file says (last when it says nothing).
  std::optional<Pooling> pooling;
  // llama-server's --slot-save-path: the directory POST /slots/{id}?action=save|restore files
  // live in (server/slot_actions.h); empty: those two actions answer 501 (erase still works).
  std::string slot_save_path;
  // What a request leaves out takes these (`serve --temp ... -n ...`; server/request_defaults.h).
  RequestDefaults request_defaults;
};

class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The models are loaded: generation requests are served from now on. Call once. `facts`
  // (model_facts.h) describe the model to Ollama's clients; without them, what the engine knows.
  void attach(Engine& engine, ModelFacts facts = {});

  // Binds the listening socket and returns its port; throws specdec::Error when it cannot.
  int bind();
  // Accepts connections until stop() or drain(); returns once no connection is left.
  void run();
  // Thread-safe: cancels every generation (queued or running), then closes every connection.
  // In-flight requests end (a stream without [DONE], a 503) instead of hanging.
  void stop();
  // Thread-safe, for SIGTERM: stops accepting, lets requests in progress finish for up to
  // `grace` (new requests on open connections get 503), then stop(). True when everything
  // finished within the grace period.
  bool drain(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specdec::server
