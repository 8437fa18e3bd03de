#include "model/arch.h"

#include <array>

namespace specdec {
namespace {

// llama: the GGUF converter permutes Q/K rows so that RoPE rotates adjacent pairs.
// qwen2: converted without that permutation, so RoPE rotates (x[i], x[i + d/2]) ("NEOX").
constexpr std::array kArchs = {
    ArchTraits{"llama", RopeStyle::Normal, false},
    ArchTraits{"qwen2", RopeStyle::Neox, true},
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
