// The per-architecture facts the loader and forward pass depend on. Each supported GGUF
// `general.architecture` is one row of a table; ModelConfig::from_gguf copies the row into the
// config, and the forward pass reads only the config. A new architecture means new fields here
// (when it does something no row does yet), one table row, and branches on those fields in the
// layers.
#pragma once

#include <string>
#include <string_view>

#include "model/model.h"

namespace specdec {

struct ArchTraits {
  std::string_view name;  // general.architecture
  RopeStyle rope_style;   // how RoPE pairs dimensions (depends on how Q/K were converted)
  bool qkv_bias;          // Q, K and V projections carry bias vectors
  // Gemma-style block (see ModelConfig for each): embeddings scaled by sqrt(n_embd), per-head
  // Q/K RMSNorm, post-attention/post-FFN norms, attention scale applied to Q, the FFN activation.
  bool scale_embd = false, qk_norm = false, post_norms = false, scale_q = false;
  FfnActivation ffn_act = FfnActivation::Silu;
  // Period of the local/global layer pattern when <arch>.attention.sliding_window is set (0: the
  // architecture has no sliding window). llama.cpp hard-codes it per architecture; GGUF has no key.
  int swa_period = 0;
};

// nullptr when the architecture is not supported.
const ArchTraits* find_arch(std::string_view name);
// "llama, qwen2, gemma3, qwen3", for error messages.
std::string supported_arch_names();

}  // namespace specdec
