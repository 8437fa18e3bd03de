#include "model/arch.h"

#include <array>

namespace specdec {
namespace {

// llama: the GGUF converter permutes Q/K rows so that RoPE rotates adjacent pairs.
// qwen2: converted without that permutation, so RoPE rotates (x[i], x[i + d/2]) ("NEOX").
// gemma3 (llama.cpp's llm_build_gemma3): NEOX RoPE, sqrt(n_embd)-scaled embeddings, Q/K RMSNorm,
// sandwich norms, GELU-gated FFN, Q pre-scaled; five sliding-window layers, then a global one.
// Its norm weights are stored with Gemma's "1 +" already added by the GGUF converter, so they
// are used as they are.
constexpr std::array kArchs = {
    ArchTraits{"llama", RopeStyle::Normal, false},
    ArchTraits{"qwen2", RopeStyle::Neox, true},
    ArchTraits{.name = "gemma3",
               .rope_style = RopeStyle::Neox,
               .qkv_bias = false,
               .scale_embd = true,
               .qk_norm = true,
               .post_norms = true,
               .scale_q = true,
               .ffn_act = FfnActivation::GeluTanh,
               .swa_period = 6},
    // qwen3 (dense; llama.cpp's llm_build_qwen3): qwen2's block without the Q/K/V biases, with
    // per-head Q/K RMSNorm before the NEOX RoPE; heads may be wider than n_embd / n_head.
    ArchTraits{.name = "qwen3", .rope_style = RopeStyle::Neox, .qkv_bias = false, .qk_norm = true},
};

}  // namespace

const ArchTraits* find_arch(std::string_view name) {
  for (const auto& a : kArchs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string supported_arch_names() {
  std::string out;
  for (const auto& a : kArchs) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace specdec
