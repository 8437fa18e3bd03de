// Everything that comes out of one GGUF file: the mapping, the weights bound into it, the
// tokenizer and the chat template. The file must outlive the model (weights point into it),
// which this bundle guarantees by owning both.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

struct LoadedModel {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;

  // `ref` is a GGUF path or a reference to one another tool keeps (ollama:NAME[:TAG],
  // hf:ORG/REPO[:QUANT]; engine/model_ref.h). Throws specdec::Error (naming the file) on
  // anything wrong with it.
  // `access`: how the file comes in (mapped, or read whole: --no-mmap; gguf::GgufFile::Access).
  static LoadedModel load(const std::string& ref, const ModelLoadOptions& options = {},
                          gguf::GgufFile::Access access = gguf::GgufFile::Access::Map);
  // The same with the weight layout chosen once the vocabulary and the model's shape are known
  // (a draft's output head in frequency order, engine/draft_vocab.h).
  static LoadedModel load(
      const std::string& ref,
      const std::function<ModelLoadOptions(const Tokenizer&, const ModelConfig&)>& layout,
      gguf::GgufFile::Access access = gguf::GgufFile::Access::Map);
};

}  // namespace specdec
