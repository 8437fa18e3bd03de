// What the server says about the model it serves (Ollama's /api/tags, /api/show and /api/ps),
// read once from the GGUF files when the models are loaded.
#pragma once

#include <cstdint>
#include <string>

#include "engine/loaded_model.h"

namespace specdec::server {

struct ModelFacts {
  std::string name;          // the model id (file stem); Ollama lists it as "<name>:latest"
  std::string file;          // the GGUF's path
  int64_t file_bytes = 0;    // its size
  int64_t modified = 0;      // its modification time (Unix seconds)
  std::string architecture;  // general.architecture, e.g. "qwen2" (also Ollama's family)
  int64_t parameters = 0;    // every tensor's elements
  std::string size_label;    // general.size_label ("1.5B"), else gguf::parameter_size()
  std::string quantization;  // general.file_type's name ("Q4_K_M"), or "unknown"
  int32_t context = 0;       // the context this server serves (its -c)
  int32_t embedding = 0;     // n_embd
  int32_t layers = 0;
  std::string chat_template;  // tokenizer.chat_template (Jinja) as the file holds it
  bool tools = false;         // the chat template has a tool-calling convention
  bool insert = false;        // fill-in-the-middle tokens (a suffix on /api/generate)
  bool thinking = false;      // the chat template reasons in <think> tags (Qwen3's)
  std::string draft;          // the draft model's file ("" without one)
};

// The facts of a loaded target model served under `name` with a context of `n_ctx` tokens;
// `chat_template`: the template text serve's --chat-template gave ("": the file's).
ModelFacts model_facts(const LoadedModel& target, const std::string& name, int32_t n_ctx,
                       const std::string& draft_path, const std::string& chat_template = "");

}  // namespace specdec::server
