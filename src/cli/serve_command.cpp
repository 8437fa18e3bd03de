// `specdec serve`: an OpenAI-compatible HTTP server (src/server) over one target model and an
// optional draft model, with speculative decoding on by default when a draft is given.
#include <pthread.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/request_default_options.h"
#include "cli/server_compat_options.h"
#include "common/error.h"
#include "engine/engine.h"
#include "engine/model_ref.h"
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

// The first signal drains: the listening socket closes, requests in progress may finish within
// the grace period, then the rest is cancelled. A second signal cancels at once.
class SignalWatcher {
 public:
  SignalWatcher(server::HttpServer& server, std::chrono::milliseconds grace) {
    thread_ = std::thread([this, &server, grace] {
      const sigset_t set = stop_signals();
      const timespec tick{0, 100'000'000};
      while (!finished_.load()) {
        if (sigtimedwait(&set, nullptr, &tick) > 0) {
          std::cerr << "specdec serve: stopping: no new connections; requests in progress have "
                    << grace.count() / 1000.0 << " s to finish" << std::endl;
          signalled_ = true;
          std::thread second([this, &server] {
            const sigset_t again = stop_signals();
            const timespec t{0, 100'000'000};
            while (!finished_.load() && !drained_.load()) {
              if (sigtimedwait(&again, nullptr, &t) > 0) {
                std::cerr << "specdec serve: second signal: cancelling" << std::endl;
                server.stop();
                return;
              }
            }
          });
          const bool clean = server.drain(grace);
          drained_ = true;
          second.join();
          std::cerr << "specdec serve: "
                    << (clean ? "every request finished" : "grace period over: cancelled the rest")
                    << std::endl;
          return;
        }
      }
    });
  }
  ~SignalWatcher() {
    finished_ = true;
    thread_.join();
  }
  bool signalled() const { return signalled_.load(); }

 private:
  std::atomic<bool> finished_{false}, signalled_{false}, drained_{false};
  std::thread thread_;
};

}  // namespace

int serve_command(const std::vector<std::string>& args) {
  std::string model, draft_model;
  LoraOptions lora;  // --lora, --lora-scaled
  server::ServerConfig config;
  int32_t port = config.port, threads = 0, n_ctx = 4096, queue_size = 16, draft_max = 0;
  uint64_t max_body = config.max_body_bytes;
  int32_t max_connections = static_cast<int32_t>(config.max_connections);
  int32_t parallel = kDefaultParallel, prefill_chunk = 32;
  bool no_prefix_sharing = false, embeddings_flag = false;
  std::string pooling;
  float request_timeout_s = 20, shutdown_grace_s = 30;
  bool request_timeout_given = false;  // --request-timeout wins over llama-server's --timeout
  ArgParser p("specdec serve -m MODEL [-md DRAFT] [--host ADDR] [--port N] [options]",
              "Serves the model over an OpenAI-compatible HTTP API: POST /v1/completions and\n"
              "/v1/chat/completions (streaming or not), POST /tokenize, /detokenize, GET\n"
              "/v1/models, /health, /metrics; also Anthropic's /v1/messages, OpenAI's\n"
              "/v1/responses, Ollama's /api/chat, /api/generate, /api/tags, /api/show, and\n"
              "llama-server's /completion and /infill. Embeddings (the target's hidden states,\n"
              "pooled): POST /v1/embeddings, /embedding, Ollama's /api/embed. A slot's cache\n"
              "saved to disk and restored: POST /slots/{id}?action=save|restore|erase\n"
              "(--slot-save-path).\n"
              "With -md, requests decode speculatively (lossless) unless they send\n"
              "\"speculative\": false. --parallel N requests generate at once, their forward\n"
              "passes batched (continuous batching); more wait in arrival order, and a full\n"
              "queue answers 503. Listens on loopback unless --host says otherwise; /health\n"
              "answers 503 \"loading\" until the models are loaded. SIGTERM or SIGINT: stop\n"
              "accepting, let requests in progress finish (--shutdown-grace), exit 0.");
  p.add_string({"-m", "--model"}, "FILE",
               "target model (GGUF); its file stem is the model id unless --alias names it", model);
  std::string alias;
  p.add_string({"-a", "--alias"}, "NAME",
               "the model's name in /v1/models, /api/tags and replies (requests may still name "
               "the file's stem, or specdec)",
               alias);
  add_lora_options(p, lora);
  ChatTemplateOption chat_template;
  add_chat_template_options(p, chat_template);
  bool lora_without_apply = false;
  p.add_flag({"--lora-init-without-apply"},
             "load the LoRA adapters at scale 0: requests name the ones they want (`lora`), or "
             "POST /lora-adapters sets the default",
             lora_without_apply);
  p.add_string({"-md", "--model-draft", "--spec-draft-model"}, "FILE",
               "draft model (GGUF) sharing the target's vocabulary", draft_model);
  add_draft_max_option(p, draft_max,
                       "tokens drafted per round (gamma) when a request does not send draft_max");
  DraftModelOptions drafting;
  KvTypes kv_types;
  DraftKvTypeFlags draft_kv_types;
  add_draft_model_options(p, drafting);
  bool ngram_given = false;  // any --ngram-* option: the lookup of --draft-hybrid or ngram-*
  add_ngram_options(p, config.ngram, ngram_given);
  add_kv_type_options(p, kv_types);
  add_draft_kv_type_options(p, draft_kv_types);
  p.add_string({"--host"}, "ADDR", "address to listen on (0.0.0.0: every interface)", config.host);
  p.add_int({"--port"}, "N", "port to listen on (0: any free port, printed at start)", port, 0,
            65535);
  p.add_value({"--api-key"}, "KEY[,KEY...]",
              "require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every endpoint but "
              "/health; several keys, comma-separated or repeated: any one of them (default: "
              "none)",
              [&config](const std::string& v) {
                for (std::string& key : split_list(v, "--api-key")) {
                  config.api_keys.push_back(std::move(key));
                }
              });
  p.add_value({"--api-key-file"}, "FILE",
              "the same, one key per line of FILE (blank lines skipped)",
              [&config](const std::string& v) {
                std::istringstream lines(read_text_file(v, "--api-key-file"));
                size_t found = 0;
                for (std::string line; std::getline(lines, line);) {
                  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
                    line.pop_back();
                  }
                  const size_t start = line.find_first_not_of(" \t");
                  if (start == std::string::npos) continue;
                  config.api_keys.push_back(line.substr(start));
                  ++found;
                }
                if (found == 0) fail("--api-key-file ", v, " holds no key");
              });
  p.add_strings({"--cors-origin"}, "ORIGIN",
                "let browser pages from ORIGIN (e.g. http://localhost:3000, or * for any) call the "
                "API (repeatable; default: none)",
                config.allowed_origins);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  p.add_int({"-c", "--ctx-size"}, "N", "context size in tokens (prompt + generation)", n_ctx, 8,
            1 << 20);
  p.add_int({"-np", "--parallel"}, "N",
            "sequences generated at once (slots, each with its own KV caches and prompt cache)",
            parallel, 1, 256);
  p.add_int({"--prefill-chunk"}, "N",
            "with --parallel > 1: prompt tokens per batched pass while others decode",
            prefill_chunk, 1, 4096);
  p.add_flag({"--no-prefix-sharing"},
             "with --parallel > 1: recompute a prompt prefix that another slot's cache holds "
             "instead of copying its K/V (the output is the same bits either way)",
             no_prefix_sharing);
  p.add_string({"--pooling"}, "none|mean|cls|last",
               "how the embedding endpoints pool a text's token states (default: as the model's "
               "file says; last when it says nothing, as for a chat model)",
               pooling);
  p.add_flag({"--embedding", "--embeddings"},
             "accepted for llama-server's command lines: the embedding endpoints are always "
             "served",
             embeddings_flag);
  p.add_string({"--slot-save-path"}, "DIR",
               "directory for POST /slots/{id}?action=save|restore files (a slot's cached text "
               "with its K/V; created if missing); without it those actions answer 501",
               config.slot_save_path);
  p.add_int({"--queue-size"}, "N", "requests that may wait for a free slot", queue_size, 1, 4096);
  p.add_u64({"--max-body-bytes"}, "N", "largest request body accepted (413 above)", max_body);
  p.add_int({"--max-connections"}, "N", "connections served at once (more get 503)",
            max_connections, 1, 4096);
  p.add_float({"--request-timeout"}, "S",
              "seconds a request's headers and body may take to arrive (408 after)",
              request_timeout_s, 0.1, 3600);
  p.also_when_given([&request_timeout_given] { request_timeout_given = true; });
  p.add_float({"--shutdown-grace"}, "S",
              "on SIGTERM, seconds requests in progress may take to finish", shutdown_grace_s, 0,
              3600);
  add_request_default_options(p, config.request_defaults);
  DeviceOptions device;
  add_device_options(p, device);
  // llama-server's switches for what this server always does.
  p.add_value({"--metrics"}, "", "accepted for llama-server's command lines: /metrics is always on",
              [](const std::string&) {});
  p.add_value({"-cb", "--cont-batching"}, "",
              "accepted for llama-server's command lines: --parallel slots always batch",
              [](const std::string&) {});
  p.add_value({"--no-webui"}, "", "accepted for llama-server's command lines: there is no web UI",
              [](const std::string&) {});
  ServerCompatOptions compat;
  add_server_compat_options(p, compat);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty()) fail("-m MODEL is required (see specdec serve --help)");
  check_draft_model_options(drafting);  // bad --draft-*type values fail before any model loads
  config.lookup_only = apply_spec_type(drafting.spec_type, drafting, draft_model, std::cerr);
  config.hybrid = check_hybrid_option(drafting.hybrid, !draft_model.empty());
  check_ngram_options(config.ngram, ngram_given, config.hybrid || config.lookup_only);
  draft_kv_types.check(!draft_model.empty());
  config.draft_length = drafting.length;
  config.draft_context = drafting.context;
  if (max_body == 0) fail("--max-body-bytes must be at least 1");
  check_request_default_options(config.request_defaults);  // before any model loads
  check_server_compat_options(compat, std::cerr);
  if (compat.timeout_s && !request_timeout_given) request_timeout_s = *compat.timeout_s;
  if (!pooling.empty()) {
    config.pooling = parse_pooling(pooling);
    if (!config.pooling) {
      fail("--pooling must be none, mean, cls or last, got '", pooling, "'");
    }
  }
  if (!config.slot_save_path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config.slot_save_path, ec);
    if (!std::filesystem::is_directory(config.slot_save_path)) {
      fail("--slot-save-path ", config.slot_save_path, " is not a directory and cannot be created",
           ec ? ": " + ec.message() : "");
    }
  }
  config.port = port;
  config.queue_size = static_cast<size_t>(queue_size);
  config.max_body_bytes = static_cast<size_t>(max_body);
  config.max_connections = static_cast<size_t>(max_connections);
  config.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(request_timeout_s * 1e3));
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(shutdown_grace_s * 1e3));
  config.draft_max = draft_max_for(draft_max, false, !config.lookup_only);
  config.greedy_draft_max = draft_max_for(draft_max, true, !config.lookup_only);
  config.model_id = model_ref_name(model);
  if (!alias.empty()) {
    config.other_model_ids.push_back(config.model_id);
    config.model_id = alias;
  }

  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that disconnects mid-write must cost an error return, not the process.
  std::signal(SIGPIPE, SIG_IGN);

  // Listen first, load second: /health says "loading" (503) meanwhile, so that a load balancer
  // or an orchestrator can tell a starting server from a dead one.
  server::HttpServer server(config);
  const int bound = server.bind();
  SignalWatcher watcher(server, grace);
  std::thread listener([&server] { server.run(); });
  std::cerr << "specdec serve: listening on http://" << config.host << ":" << bound
            << (config.api_keys.empty() ? "" : " (API key required)") << "; loading models"
            << std::endl;
  struct JoinOnExit {  // the listener thread must end before `server` goes, even on a throw
    server::HttpServer& server;
    std::thread& thread;
    ~JoinOnExit() {
      server.stop();
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{server, listener};

  LoadedModel target = LoadedModel::load(model, ModelLoadOptions{}, file_access(device));
  apply_lora_options(lora, target);
  apply_chat_template_option(chat_template, target);
  if (lora_without_apply) {
    std::vector<ActiveLora> off(target.model->lora().begin(), target.model->lora().end());
    for (ActiveLora& a : off) a.scale = 0.0f;
    target.model->set_lora(off);
  }
  std::unique_ptr<LoadedModel> draft = load_draft(draft_model, drafting, file_access(device));
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.kv_types = kv_types;
  eo.draft_kv_types = draft_kv_types.resolve(kv_types);
  eo.n_threads = thread_count(threads);
  eo.draft_vocab = drafting.vocab;
  eo.n_slots = parallel;
  eo.prefill_chunk = prefill_chunk;
  eo.share_prefixes = !no_prefix_sharing;
  eo.draft_after_first_token = true;  // engine.h: the first token without waiting for the draft
  Engine engine(target, draft.get(), eo);
  apply_device_options(device, std::cerr);
  if (!watcher.signalled()) {
    server.attach(engine, server::model_facts(target, config.model_id, n_ctx, draft_model,
                                              chat_template.text));
    std::cerr << "specdec serve: ready: model '" << config.model_id << "'"
              << (draft ? " with draft '" + draft_model + "'" : std::string()) << ", context "
              << n_ctx << ", " << eo.n_threads << " threads, " << parallel << " slot"
              << (parallel == 1 ? "" : "s") << std::endl;
  }
  // Serves until a signal drains and stops the server; then the engine may go.
  listener.join();
  const bool ok = watcher.signalled();
  if (!ok) fail("the server stopped unexpectedly");
  return 0;
}

}  // namespace specdec::cli
