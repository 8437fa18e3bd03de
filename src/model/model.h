// A decoder-only transformer loaded from GGUF (architectures: llama, qwen2; gemma3 is meant to
// be a contained addition: one config branch plus its layer differences).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/kv_cache.h"
#include "tensor/matmul.h"

namespace specdec {

class ThreadPool;

enum class RopeStyle { Normal, Neox };  // llama: adjacent pairs; qwen2: halves

struct ModelConfig {
  std::string arch;
  int32_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int32_t n_ff = 0, n_ctx_train = 0;
  float rms_eps = 1e-5f, rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::Normal;
  // RoPE scaling (linear factor; llama3-style frequency scaling when rope_llama3 is set)
  float rope_freq_scale = 1.0f;
  bool rope_llama3 = false;
  float rope_llama3_factor = 8.0f, rope_llama3_low = 1.0f, rope_llama3_high = 4.0f;
  int32_t rope_llama3_orig_ctx = 8192;
  bool qkv_bias = false, tied_output = false;
  // Reads and validates the config from metadata; throws specdec::Error for unknown
  // architectures or absurd sizes.
  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

class Model {
 public:
  // Binds weights from an open file (which must outlive the model); validates every tensor's
  // presence, shape and type, throwing specdec::Error naming the tensor.
  static std::unique_ptr<Model> load(const gguf::GgufFile& file);
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  size_t weight_bytes() const { return weight_bytes_; }

  // Runs tokens[i] at positions[i] (i < k) on top of cache (which grows by k) and writes the
  // logits of the rows listed in logit_rows (indices into tokens, ascending) to
  // logits_out[j * n_vocab ...]. Row j's result is bitwise independent of k and of the other
  // tokens in the call (batch invariance). Throws specdec::Error if the cache would overflow.
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions,
               KvCache& cache, std::span<const int32_t> logit_rows, float* logits_out,
               ThreadPool& pool);

 protected:
  Model() = default;
  ModelConfig config_;
  size_t weight_bytes_ = 0;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace specdec
