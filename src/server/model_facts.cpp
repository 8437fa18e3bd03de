#include "server/model_facts.h"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <utility>

namespace specdec::server {

ModelFacts model_facts(const LoadedModel& target, const std::string& name, int32_t n_ctx,
                       const std::string& draft_path) {
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
  f.size_label = file.get_string_or("general.size_label", parameter_size(f.parameters));
  f.quantization = file_type_name(file.get_int_or("general.file_type", -1));
  f.context = n_ctx;
  f.embedding = c.n_embd;
  f.layers = c.n_layer;
  f.chat_template = file.get_string_or("tokenizer.chat_template", "");
  f.tools = target.chat_template->supports_tools();
  f.insert = target.tokenizer->fim().has_value();
  f.draft = draft_path;
  return f;
}

std::string file_type_name(int64_t file_type) {
  // llama.cpp's enum llama_ftype, the values general.file_type holds.
  static const std::array<std::pair<int64_t, const char*>, 27> kNames = {{
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
      {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},
      {30, "IQ4_XS"},  {32, "BF16"},
  }};
  for (const auto& [id, type] : kNames) {
    if (id == file_type) return type;
  }
  return "unknown";
}

std::string parameter_size(int64_t parameters) {
  char buf[32];
  if (parameters >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fB", static_cast<double>(parameters) / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fM", static_cast<double>(parameters) / 1e6);
  }
  return buf;
}

}  // namespace specdec::server
