#include "engine/loaded_model.h"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/model_ref.h"
#include "model/lora.h"

namespace specdec {

LoadedModel LoadedModel::load(const std::string& ref, const ModelLoadOptions& options,
                              gguf::GgufFile::Access access) {
  return load(
      ref, [&options](const Tokenizer&, const ModelConfig&) { return options; }, access);
}

LoadedModel LoadedModel::load(
    const std::string& ref,
    const std::function<ModelLoadOptions(const Tokenizer&, const ModelConfig&)>& layout,
    gguf::GgufFile::Access access) {
  LoadedModel m;
  const ResolvedModel resolved = resolve_model(ref);
  const std::string& path = resolved.path;
  std::error_code ec;
  if (!is_model_ref(ref) && !std::filesystem::exists(path, ec) &&
      path.find('/') == std::string::npos && path.find(':') != std::string::npos) {
    // "qwen2.5-coder:1.5b" reads like a model Ollama pulled, not like a file.
    fail(path, ": no such file; for a model Ollama pulled, write ollama:", path);
  }
  m.file = gguf::GgufFile::open(path, access);
  if (m.file->get_string_or("general.type", "") == "adapter") {
    fail(path, ": a ", m.file->get_string_or("adapter.type", "model"),
         " adapter, not a model; apply it to its model with --lora");
  }
  try {
    m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*m.file));
    m.model = Model::load(*m.file, layout(*m.tokenizer, ModelConfig::from_gguf(*m.file)));
    m.chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(*m.file));
  } catch (const Error& e) {
    // Model/tokenizer errors name a tensor or key; add the file so the user knows which model.
    std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    fail(path, ": ", what);
  }
  if (m.tokenizer->n_vocab() < m.model->config().n_vocab) {
    fail(path, ": tokenizer has ", m.tokenizer->n_vocab(), " tokens but the model outputs ",
         m.model->config().n_vocab, " logits");
  }
  // An Ollama model's ADAPTER layers, at scale 1 as Ollama applies them.
  std::vector<std::pair<std::string, float>> adapters;
  for (const std::string& a : resolved.adapters) adapters.emplace_back(a, 1.0f);
  add_lora_files(*m.model, adapters);
  return m;
}

}  // namespace specdec
