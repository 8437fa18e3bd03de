// Tiny LoRA adapters in llama.cpp's GGUF form, for the models of tiny_model.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "support/tiny_model.h"

namespace specdec::testing {

struct TinyLoraSpec {
  float alpha = 8.0f;  // adapter.lora.alpha (0: left out)
  int rank = 4;
  uint64_t seed = 7;
  // The block matrices it adapts, by their tensor names in the model.
  std::vector<std::string> matrices = {"blk.0.attn_q.weight", "blk.0.attn_v.weight",
                                       "blk.1.attn_output.weight", "blk.1.ffn_up.weight",
                                       "blk.1.ffn_down.weight"};
  std::string type = "adapter";                 // general.type
  std::function<void(gguf::GgufWriter&)> edit;  // runs just before the file is written
};

// Writes an adapter for a model written from `model` (its architecture and shapes): F32 pairs
// "<name>.lora_a" [n_in, rank] and "<name>.lora_b" [rank, n_out], both random and large enough
// that the adapter changes the model's logits. Returns path.
std::string write_tiny_lora(const TinyModelSpec& model, const TinyLoraSpec& lora,
                            const std::string& path);

}  // namespace specdec::testing
