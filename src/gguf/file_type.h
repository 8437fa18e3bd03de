// Names for what a GGUF file's metadata holds as numbers, as the tools around it print them.
#pragma once

#include <cstdint>
#include <string>

namespace specdec::gguf {

// llama.cpp's file types (general.file_type) by name: "Q4_K_M" for 15; "unknown" otherwise.
std::string file_type_name(int64_t file_type);
// "1.5B", "494M": a parameter count as Ollama and Hugging Face print it.
std::string parameter_size(int64_t parameters);

}  // namespace specdec::gguf
