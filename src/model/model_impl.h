// Internal to src/model: the bound weights and the reusable scratch buffers behind Model.
#pragma once

#include <cstdint>
#include <vector>

#include "model/lora.h"
#include "model/model.h"
#include "model/rope.h"
#include "model/weight_packing.h"
#include "tensor/matmul.h"

namespace specdec {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;            // n_embd each
  std::vector<float> bq, bk, bv;                     // empty unless config.qkv_bias
  std::vector<float> q_norm, k_norm;                 // head_dim each; empty unless config.qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // n_embd each; empty unless post_norms
  WeightMatrix wq, wk, wv, wo;              // q_dim x n_embd, kv_dim x n_embd (x2), n_embd x q_dim
  WeightMatrix ffn_gate, ffn_up, ffn_down;  // n_ff x n_embd (x2), n_embd x n_ff
};

struct ModelWeights {
  WeightMatrix token_embd;  // n_vocab x n_embd
  WeightMatrix output;      // n_vocab x n_embd; the same matrix as token_embd when tied
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;
};

// Activations for up to `tokens` rows. Grown (never shrunk) when a larger batch arrives, so the
// steady-state decode loop does not allocate.
struct Scratch {
  int64_t tokens = 0;
  std::vector<float> x;                   // residual stream, k x n_embd
  std::vector<float> xn;                  // normalized input of the current block, k x n_embd
  std::vector<float> q, kv_k, kv_v;       // projections, k x q_dim / k x kv_dim
  std::vector<float> attn;                // attention output, k x q_dim
  std::vector<float> proj;                // output of attn_output / ffn_down, k x n_embd
  std::vector<float> gate, up;            // FFN hidden, k x n_ff
  std::vector<float> rope_cos, rope_sin;  // k x rope_dim/2
  std::vector<float> rope_cos_swa, rope_sin_swa;  // the same for local layers (sliding window)
  // Attention scores, then probabilities: a row of cache slots per (token, head) of a block of
  // new tokens; and 1 / sum of each row.
  std::vector<float> scores, inv_sums;
  std::vector<uint8_t> q8_queries;  // a block's queries quantized for q8_0 keys
  // A vocabulary subset's views of the output head, their matmul targets, and (for several
  // logit rows) their products before they are interleaved into logit rows.
  std::vector<WeightMatrix> head_views;
  std::vector<MatmulTarget> head_targets;
  std::vector<float> head_out;
  // A multi-sequence pass: every row's token, position, sequence and cache slot; the logit rows
  // of all sequences (indices into the pass's rows) and their logits before they are handed out.
  std::vector<int32_t> row_tokens, row_positions, row_sequence, row_slot, logit_rows;
  std::vector<int32_t> group_rows;  // one vocabulary subset's logit rows (forward_batch)
  // Each row's LoRA adapter scales (rows x adapters; SequenceRows::lora_scales), moved with the
  // rows that go on through the last layer.
  std::vector<float> row_lora_scales;
  std::vector<float> logits;
};

struct Model::Impl {
  ModelWeights weights;
  PackedStore packed;  // the matrices' packed (and requantized) copies (weight_packing.h)
  RopeFreqs rope;      // RoPE frequencies
  RopeFreqs rope_swa;  // for local layers (sliding window)
  Scratch scratch;
  std::vector<ActiveLora> lora;  // Model::set_lora
};

}  // namespace specdec
