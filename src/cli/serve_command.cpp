// `specdec serve`: an OpenAI-compatible HTTP server (src/server) over one target model and an
// optional draft model, with speculative decoding on by default when a draft is given.
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <iostream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "common/error.h"
#include "engine/engine.h"
#include "server/http_server.h"

namespace specdec::cli {

namespace {

// SIGINT/SIGTERM stop the server cleanly (generations cancelled, threads joined) instead of
// killing it mid-write. block_stop_signals() runs before any thread exists (the engine's pool,
// the generation worker, the HTTP threads), so all of them inherit the mask and only the
// watcher receives the signals.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

class SignalWatcher {
 public:
  explicit SignalWatcher(server::HttpServer& server) {
    thread_ = std::thread([this, &server] {
      const sigset_t set = stop_signals();
      const timespec tick{0, 100'000'000};
      while (!finished_.load()) {
        if (sigtimedwait(&set, nullptr, &tick) > 0) {
          std::cerr << "specdec serve: stopping" << std::endl;
          server.stop();
          return;
        }
      }
    });
  }
  ~SignalWatcher() {
    finished_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace

int serve_command(const std::vector<std::string>& args) {
  std::string model, draft_model;
  server::ServerConfig config;
  int32_t port = config.port, threads = 0, n_ctx = 4096, queue_size = 16,
          draft_max = kDefaultDraftMax, draft_vocab = kDefaultDraftVocab;
  uint64_t max_body = config.max_body_bytes;
  ArgParser p("specdec serve -m MODEL [-md DRAFT] [--host ADDR] [--port N] [options]",
              "Serves the model over an OpenAI-compatible HTTP API: POST /v1/completions and\n"
              "/v1/chat/completions (streaming or not), GET /v1/models, /health, /metrics.\n"
              "With -md, requests decode speculatively (lossless) unless they send\n"
              "\"speculative\": false. Requests run one at a time in arrival order; a full\n"
              "queue answers 503. Listens on loopback unless --host says otherwise.");
  p.add_string({"-m", "--model"}, "FILE", "target model (GGUF); its file stem is the model id",
               model);
  p.add_string({"-md", "--model-draft"}, "FILE",
               "draft model (GGUF) sharing the target's vocabulary", draft_model);
  p.add_int({"--draft-max", "--draft"}, "N", "default tokens drafted per round (gamma)", draft_max,
            1, 64);
  add_draft_vocab_option(p, draft_vocab);
  config.draft_length = default_draft_length();
  add_draft_length_options(p, config.draft_length);
  HybridOption hybrid;
  add_hybrid_option(p, hybrid);
  p.add_string({"--host"}, "ADDR", "address to listen on (0.0.0.0: every interface)", config.host);
  p.add_int({"--port"}, "N", "port to listen on (0: any free port, printed at start)", port, 0,
            65535);
  p.add_string({"--api-key"}, "KEY",
               "require 'Authorization: Bearer KEY' on every endpoint but /health", config.api_key);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size in tokens (prompt + generation)", n_ctx, 8,
            1 << 20);
  p.add_int({"--queue-size"}, "N", "requests that may wait for the generation worker", queue_size,
            1, 4096);
  p.add_u64({"--max-body-bytes"}, "N", "largest request body accepted (413 above)", max_body);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty()) fail("-m MODEL is required (see specdec serve --help)");
  config.hybrid = check_hybrid_option(hybrid, !draft_model.empty());
  if (max_body == 0) fail("--max-body-bytes must be at least 1");
  config.port = port;
  config.queue_size = static_cast<size_t>(queue_size);
  config.max_body_bytes = static_cast<size_t>(max_body);
  config.draft_max = draft_max;
  config.model_id = server::model_id_from_path(model);

  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  LoadedModel target = LoadedModel::load(model);
  std::unique_ptr<LoadedModel> draft = load_draft(draft_model);
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.n_threads = thread_count(threads);
  eo.draft_vocab = draft_vocab;
  Engine engine(target, draft.get(), eo);

  // A client that disconnects mid-write must cost an error return, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  server::HttpServer server(engine, config);
  const int bound = server.bind();
  bool ok = false;
  {
    SignalWatcher watcher(server);
    std::cerr << "specdec serve: model '" << config.model_id << "'"
              << (draft ? " with draft '" + draft_model + "'" : std::string()) << ", context "
              << n_ctx << ", " << eo.n_threads << " threads\n"
              << "specdec serve: listening on http://" << config.host << ":" << bound
              << (config.api_key.empty() ? "" : " (API key required)") << std::endl;
    ok = server.run();
    server.stop();
  }
  if (!ok) fail("the server stopped unexpectedly");
  return 0;
}

}  // namespace specdec::cli
