// The per-architecture facts the loader and forward pass depend on. Each supported GGUF
// `general.architecture` is one row of a table; ModelConfig::from_gguf copies the row into the
// config, and the forward pass reads only the config. A new architecture (e.g. gemma3, which
// scales embeddings by sqrt(n_embd), uses GELU, normalizes Q/K per head and adds post-norms)
// means new fields here, one table row, and branches on those fields in the layers.
#pragma once

#include <string>
#include <string_view>

#include "model/model.h"

namespace specdec {

struct ArchTraits {
  std::string_view name;  // general.architecture
  RopeStyle rope_style;   // how RoPE pairs dimensions (depends on how Q/K were converted)
  bool qkv_bias;          // Q, K and V projections carry bias vectors
};

// nullptr when the architecture is not supported.
const ArchTraits* find_arch(std::string_view name);
// "llama, qwen2", for error messages.
std::string supported_arch_names();

}  // namespace specdec
