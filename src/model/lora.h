// LoRA adapters in llama.cpp's GGUF form (convert_lora_to_gguf.py; general.type "adapter",
// adapter.type "lora", adapter.lora.alpha): for a weight W of the transformer blocks, a pair
// "<W's name>.lora_a" (rank rows of W's input width) and "<W's name>.lora_b" (W's output rows of
// rank width), and the block's product becomes W x + s B (A x) with s = scale * alpha / rank
// (scale itself when alpha is 0), as llama.cpp computes it.
//
// The low-rank product runs beside the matmul, per row, in f32 and in a fixed order, so a row's
// result does not depend on the other rows of its pass: the forward pass stays batch invariant
// with an adapter, and greedy speculation with an adapted target equals the adapted target alone.
// The draft needs no adapter: speculation is exact for any draft (a draft without it only
// accepts less where the adapter moves the target).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"

namespace specdec {

class ThreadPool;

// The block matrices an adapter can hold a pair for.
enum class LoraTarget : int { AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown };
inline constexpr int kLoraTargets = 7;

struct LoraMatrix {
  int32_t rank = 0;  // 0: no pair for this matrix
  int32_t n_in = 0, n_out = 0;
  std::vector<float> a;   // rank x n_in: A, as in the file
  std::vector<float> bt;  // rank x n_out: B transposed, so that B t is rank axpys over a row
};

struct LoraAdapter {
  std::string path;
  float alpha = 0.0f;        // adapter.lora.alpha; 0: the scale is used as is
  uint64_t fingerprint = 0;  // of the file's contents (gguf::content_fingerprint)
  std::vector<std::array<LoraMatrix, kLoraTargets>> layers;  // [layer][target]
  int32_t pairs() const;                                     // matrices with a pair
  // s for a matrix of this adapter applied at `scale`.
  float factor(const LoraMatrix& m, float scale) const {
    return alpha != 0.0f ? scale * alpha / static_cast<float>(m.rank) : scale;
  }
};

// Reads an adapter for a model of this configuration. Throws specdec::Error naming the file and,
// where one is at fault, the tensor: not a LoRA adapter, another architecture, a pair whose
// shapes do not fit the model's matrix, half a pair, a tensor it cannot apply (the embedding,
// the output head), a type it cannot read.
std::shared_ptr<const LoraAdapter> load_lora_adapter(const std::string& path,
                                                     const ModelConfig& config);

// An adapter as a model applies it.
struct ActiveLora {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1.0f;
};

// Reads each (path, scale) adapter for the model and adds it after the adapters the model
// already applies (Model::set_lora). Throws like load_lora_adapter; the model is then unchanged.
void add_lora_files(Model& model, std::span<const std::pair<std::string, float>> files);

// Throws specdec::Error unless scales holds one finite scale per adapter.
void check_lora_scales(std::span<const ActiveLora> adapters, std::span<const float> scales);

// What a KV cache computed with these adapters at these scales (one per adapter, in order) may
// be reused by: equal for equal adapters and scales, 0 without adapters.
uint64_t lora_fingerprint(std::span<const ActiveLora> adapters, std::span<const float> scales);

// out[i] += sum over the adapters a of s B (A x[i]) for the pair of (layer, target), with s from
// row_scales[i * adapters.size() + a], rows i < rows of x (n_in wide) and out (n_out wide). A
// row's adapter at scale 0 is skipped. Each row is computed alone, in the same order for any
// `rows`, any thread count and any other rows' scales.
void apply_lora(std::span<const ActiveLora> adapters, const float* row_scales, int32_t layer,
                LoraTarget target, const float* x, int64_t rows, float* out, ThreadPool& pool);

}  // namespace specdec
