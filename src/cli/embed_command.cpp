// `specdec embed -m MODEL -p TEXT`: text embeddings on the command line, as llama.cpp's
// llama-embedding gives them (engine/embedding.h: the model's final-normed hidden states,
// pooled and normalized), one text per line unless --embd-separator says otherwise.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "common/error.h"
#include "engine/embedding.h"
#include "engine/loaded_model.h"
#include "engine/model_lm.h"
#include "server/embeddings_api.h"
#include "tensor/thread_pool.h"

namespace specdec::cli {

namespace {

std::vector<std::string> split_texts(const std::string& all, const std::string& separator) {
  std::vector<std::string> out;
  if (separator.empty()) return {all};
  for (size_t start = 0;;) {
    const size_t end = all.find(separator, start);
    std::string piece = all.substr(start, end == std::string::npos ? end : end - start);
    if (!piece.empty()) out.push_back(std::move(piece));
    if (end == std::string::npos) return out;
    start = end + separator.size();
  }
}

}  // namespace

int embed_command(const std::vector<std::string>& args) {
  std::string model, prompt, file, separator = "\n", format = "array", pooling_name_arg;
  LoraOptions lora;  // --lora, --lora-scaled
  int32_t threads = 0, normalize = 2;
  ArgParser p("specdec embed -m MODEL (-p TEXT | -f FILE) [options]",
              "Prints the embedding of each text (one per line of the input unless\n"
              "--embd-separator says otherwise): the model's hidden states after the final norm,\n"
              "pooled as --pooling says (default: as the GGUF's pooling_type says, the last\n"
              "token's when it says nothing, as for a chat model) and normalized, as llama.cpp's\n"
              "llama-embedding and llama-server's /v1/embeddings give them.");
  p.add_string({"-m", "--model"}, "FILE", "model (GGUF)", model);
  add_lora_options(p, lora);
  p.add_string({"-p", "--prompt"}, "TEXT", "the text(s) to embed", prompt);
  p.add_string({"-f", "--file"}, "FILE", "read the text(s) from a file", file);
  p.add_string({"--pooling"}, "none|mean|cls|last", "how token states become one vector",
               pooling_name_arg);
  p.add_int({"--embd-normalize"}, "N",
            "-1 none, 0 int16 range, 1 taxicab, 2 Euclidean (default), p > 2 the p-norm", normalize,
            -1, 64);
  p.add_string({"--embd-separator"}, "SEP", "what separates texts (default: a newline)", separator);
  p.add_string({"--embd-output-format"}, "array|json",
               "array: [[...], ...] (default); json: OpenAI's embeddings response", format);
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 1, 1024);
  if (!p.parse(args)) {
    std::cout << p.help();
    return 0;
  }
  if (model.empty()) fail("embed needs -m MODEL");
  if (prompt.empty() == file.empty()) fail("embed needs one of -p TEXT and -f FILE");
  if (format != "array" && format != "json") {
    fail("--embd-output-format must be array or json, got '", format, "'");
  }
  std::optional<Pooling> pooling;
  if (!pooling_name_arg.empty()) {
    pooling = parse_pooling(pooling_name_arg);
    if (!pooling) fail("--pooling must be none, mean, cls or last, got '", pooling_name_arg, "'");
  }
  const std::vector<std::string> texts =
      split_texts(file.empty() ? prompt : read_text_file(file, "text file"), separator);
  if (texts.empty()) fail("there is no text to embed");

  LoadedModel m = LoadedModel::load(model);
  apply_lora_options(lora, m);
  const EmbeddingParams params{pooling ? *pooling : default_pooling(m.model->config()), normalize};
  // As llama-embedding: special tokens added as the vocabulary asks and parsed from the text.
  std::vector<std::vector<int32_t>> inputs;
  int32_t longest = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    inputs.push_back(m.tokenizer->encode(texts[i], /*add_special=*/true, /*parse_special=*/true));
    if (inputs.back().empty()) fail("text ", i + 1, " has no tokens");
    longest = std::max(longest, static_cast<int32_t>(inputs.back().size()));
  }
  if (longest > m.model->config().n_ctx_train) {
    fail("a text has ", longest, " tokens, more than the model's context of ",
         m.model->config().n_ctx_train);
  }
  const int n_threads = thread_count(threads);
  ThreadPool pool(n_threads);
  ModelLM lm(*m.model, longest, pool);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> vectors;
  int64_t tokens = 0;
  for (const std::vector<int32_t>& in : inputs) {
    lm.truncate(0);
    for (std::vector<float>& v : embed_tokens(lm, in, params)) vectors.push_back(std::move(v));
    tokens += static_cast<int64_t>(in.size());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t dimensions = vectors.front().size();
  if (format == "array") {
    std::cout << nlohmann::json(vectors).dump() << "\n";
  } else {
    // The server's /v1/embeddings shape, every vector (each token's, with pooling none) its own
    // entry.
    std::vector<std::vector<std::vector<float>>> entries;
    for (std::vector<float>& v : vectors) entries.push_back({std::move(v)});
    const server::EmbeddingRequest shape;  // OpenAI's, floats
    std::cout << server::embeddings_json(shape, model, entries, tokens, seconds * 1e3).dump(2)
              << "\n";
  }
  std::cerr << "embed: " << texts.size() << " text(s), " << tokens << " tokens, pooling "
            << pooling_name(params.pooling) << ", " << dimensions << " dimensions, " << seconds
            << " s (" << static_cast<double>(tokens) / seconds << " tokens/s, " << n_threads
            << " threads)\n";
  return 0;
}

}  // namespace specdec::cli
