// The OpenAI-compatible HTTP front end (cpp-httplib): routes, API-key check, error mapping and
// response streaming. Generation itself happens on the GenerationQueue's single worker; HTTP
// threads validate, tokenize (the tokenizer is immutable and thread-safe), enqueue and wait.
//
//   POST /v1/completions, POST /v1/chat/completions   (stream or not)
//   GET  /v1/models, GET /health (never needs the key), GET /metrics (Prometheus text)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace specdec::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (bind() returns it)
  std::string api_key;  // empty: no authentication
  size_t queue_size = 16;
  size_t max_body_bytes = 1 << 20;
  std::string model_id;            // the target GGUF file's stem; "specdec" is always accepted too
  int32_t draft_max = 5;           // γ when a request does not say
  DraftLengthParams draft_length;  // fixed γ or the adaptive rule (engine.h)
  bool hybrid = false;             // prompt lookup first, the draft model otherwise (engine.h)
};

class HttpServer {
 public:
  HttpServer(Engine& engine, ServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket and returns its port; throws specdec::Error when it cannot.
  int bind();
  // Serves until stop(); returns false if listening failed.
  bool run();
  // Thread-safe: cancels every generation (queued or running), then stops listening. In-flight
  // requests end (a stream without [DONE], a 503) instead of hanging.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The model id clients use: the file name without directories and without ".gguf".
std::string model_id_from_path(const std::string& path);

}  // namespace specdec::server
