// `specdec perplexity -m MODEL -f TEXT`: the model's perplexity over a text, computed as
// llama.cpp's llama-perplexity computes it (engine/perplexity.h), so that a quantization, or our
// kernels, can be checked against llama.cpp's number on the same file and text.
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "common/error.h"
#include "engine/loaded_model.h"
#include "engine/model_lm.h"
#include "engine/perplexity.h"
#include "tensor/thread_pool.h"

namespace specdec::cli {

int perplexity_command(const std::vector<std::string>& args) {
  std::string model, text_file, json_file;
  LoraOptions lora;  // --lora, --lora-scaled
  int32_t n_ctx = 512, chunks = 0, batch = 64, threads = 0;
  ArgParser p("specdec perplexity -m MODEL -f TEXT [options]",
              "The model's perplexity over a text file, as llama.cpp's llama-perplexity computes\n"
              "it: the text's tokens in windows of -c tokens, each read from an empty cache (its\n"
              "first token BOS when the vocabulary adds one), the second half of each window\n"
              "scored. Prints the running value after each window and the final estimate with\n"
              "its standard error.");
  p.add_string({"-m", "--model"}, "FILE", "model (GGUF)", model);
  add_lora_options(p, lora);
  p.add_string({"-f", "--file"}, "FILE", "text to score", text_file);
  p.add_int({"-c", "--ctx-size"}, "N", "window size in tokens (default 512)", n_ctx, 4, 1 << 20);
  p.add_int({"--chunks"}, "N", "score at most N windows (default: all)", chunks, 0, 1 << 30);
  p.add_int({"-b", "--batch-size"}, "N", "rows per forward pass (default 64)", batch, 1, 4096);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  p.add_string({"--json"}, "FILE", "also write the result as JSON", json_file);
  KvTypes kv_types;
  add_kv_type_options(p, kv_types);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty() || text_file.empty()) fail("perplexity needs -m MODEL and -f TEXT");
  const std::string text = read_text_file(text_file, "text file");
  LoadedModel m = LoadedModel::load(model);
  apply_lora_options(lora, m);
  if (n_ctx > m.model->config().n_ctx_train) {
    fail("-c ", n_ctx, " exceeds the model's context of ", m.model->config().n_ctx_train,
         " tokens");
  }
  const Tokenizer& tok = *m.tokenizer;
  // As llama-perplexity: special tokens added as the vocabulary asks, none parsed from the text.
  const std::vector<int32_t> tokens = tok.encode(text, /*add_special=*/true, false);
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.max_chunks = chunks;
  o.batch = batch;
  o.bos = tok.add_bos() ? tok.bos() : -1;
  const int n_threads = thread_count(threads);
  ThreadPool pool(n_threads);
  ModelLM lm(*m.model, n_ctx, pool, kv_types);
  const int32_t windows = perplexity_windows(tokens.size(), o);
  std::cerr << "perplexity: " << tokens.size() << " tokens, " << windows << " windows of " << n_ctx
            << " (the last " << n_ctx - 1 - n_ctx / 2 << " tokens of each scored), " << n_threads
            << " threads\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::cout << std::fixed << std::setprecision(4);
  const PerplexityResult r = perplexity(lm, tokens, o, [](int32_t chunk, double ppl) {
    std::cout << "[" << chunk + 1 << "]" << ppl << "," << std::flush;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double read = static_cast<double>(r.chunks) * n_ctx;
  std::cout << "\nFinal estimate: PPL = " << r.ppl << " +/- " << std::setprecision(5) << r.ppl_error
            << "\n";
  std::cout << std::setprecision(1) << r.scored << " tokens scored in " << r.chunks << " windows, "
            << seconds << " s (" << read / seconds << " tokens/s read)\n";
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    if (!out) fail("cannot write --json file '", json_file, "'");
    out << nlohmann::json{{"model", model},         {"n_ctx", n_ctx},
                          {"chunks", r.chunks},     {"scored_tokens", r.scored},
                          {"ppl", r.ppl},           {"ppl_error", r.ppl_error},
                          {"mean_nll", r.mean_nll}, {"seconds", seconds},
                          {"threads", n_threads}}
               .dump(2)
        << "\n";
  }
  return 0;
}

}  // namespace specdec::cli
