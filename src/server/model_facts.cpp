#include "server/model_facts.h"

#include <sys/stat.h>

#include "gguf/file_type.h"

namespace specdec::server {

ModelFacts model_facts(const LoadedModel& target, const std::string& name, int32_t n_ctx,
                       const std::string& draft_path, const std::string& chat_template) {
  const gguf::GgufFile& file = *target.file;
  const ModelConfig& c = target.model->config();
  ModelFacts f;
  f.name = name;
  f.file = file.path();
  f.file_bytes = static_cast<int64_t>(file.file_size());
  struct stat st {};
  if (::stat(file.path().c_str(), &st) == 0) f.modified = static_cast<int64_t>(st.st_mtime);
  f.architecture = c.arch;
  for (const auto& t : file.tensors()) f.parameters += t.n_elements();
  f.size_label = file.get_string_or("general.size_label", gguf::parameter_size(f.parameters));
  f.quantization = gguf::file_type_name(file.get_int_or("general.file_type", -1));
  f.context = n_ctx;
  f.embedding = c.n_embd;
  f.layers = c.n_layer;
  f.chat_template =
      chat_template.empty() ? file.get_string_or("tokenizer.chat_template", "") : chat_template;
  f.tools = target.chat_template->supports_tools();
  f.insert = target.tokenizer->fim().has_value();
  f.thinking = target.chat_template->thinking();
  f.draft = draft_path;
  return f;
}

}  // namespace specdec::server
