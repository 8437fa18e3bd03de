// A decoder-only transformer loaded from GGUF (architectures: llama, qwen2, gemma3). What differs
// between architectures is described by ArchTraits (model/arch.h) and copied into ModelConfig, so
// the forward pass branches on features (embedding scale, GELU, QK-norm, post-norms, sliding
// window), never on architecture names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/kv_cache.h"
#include "model/vocab_subset.h"
#include "tensor/matmul.h"

namespace specdec {

class ThreadPool;
struct ActiveLora;  // model/lora.h

enum class RopeStyle { Normal, Neox };        // llama: adjacent pairs; qwen2, gemma3: halves
enum class FfnActivation { Silu, GeluTanh };  // gated FFN: down(act(gate(x)) * up(x))

struct ModelConfig {
  std::string arch;
  int32_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int32_t n_ff = 0, n_ctx_train = 0;
  int32_t rope_dim = 0;  // leading dimensions of each head that RoPE rotates (even, <= head_dim)
  float rms_eps = 1e-5f, rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::Normal;
  // Linear RoPE scaling: positions are multiplied by this (1 / rope.scaling.factor). Llama 3.1+
  // frequency scaling comes as the rope_freqs.weight tensor and is applied by the model.
  float rope_freq_scale = 1.0f;
  bool qkv_bias = false, tied_output = false;

  // Gemma-style blocks (all off for llama and qwen2).
  bool scale_embd = false;  // token embeddings multiplied by sqrt(n_embd)
  bool qk_norm = false;     // per-head RMSNorm of Q and K (attn_q_norm/attn_k_norm) before RoPE
  bool post_norms = false;  // RMSNorm of the attention and FFN outputs before each residual add
  FfnActivation ffn_act = FfnActivation::Silu;
  // Multiplier of q.k. scale_q: applied to Q (after RoPE) before the dot products, as llama.cpp
  // does for gemma (a different rounding from scaling the scores, which llama and qwen2 do).
  float attn_scale = 0;
  bool scale_q = false;
  // Sliding-window attention: layer l is local when sliding_window > 0 and
  // l % swa_period < swa_period - 1 (gemma3: five local layers, then one global). A local layer's
  // token at position p sees only the last sliding_window positions (p - sliding_window, p] and
  // rotates with rope_theta_swa and no frequency scaling.
  int32_t sliding_window = 0, swa_period = 0;
  float rope_theta_swa = 10000.0f;
  bool is_local_layer(int32_t l) const {
    return sliding_window > 0 && swa_period > 0 && l % swa_period < swa_period - 1;
  }

  // How the file says its hidden states make one embedding ({arch}.pooling_type, llama.cpp's
  // numbering: 0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 when it does not say (a chat model).
  int32_t pooling_type = -1;

  int32_t q_dim() const { return n_head * head_dim; }      // width of Q and attention output
  int32_t kv_dim() const { return n_head_kv * head_dim; }  // width of K and V (one cache row)

  // Reads and validates the config from metadata; throws specdec::Error for unknown
  // architectures or absurd sizes, naming the key.
  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

// How a model's weights are held once loaded (model/weight_packing.h). The defaults keep the
// file's types and the whole output head; the other settings are for drafts, whose weights
// can be anything without changing what speculative decoding outputs.
struct ModelLoadOptions {
  // Requantize the transformer blocks' matrices into this (packable) type. Unset: the file's.
  std::optional<GgmlType> matrix_type;
  // Only the block matrices the file stores in more bytes per weight than matrix_type: a step
  // streams fewer bytes where it can, and a matrix already as small (a Q4_K among Q5_0 ones)
  // keeps its own, more accurate, type.
  bool matrix_type_only_where_smaller = false;
  // The same for the output head (never the token embedding, which is only looked up).
  std::optional<GgmlType> output_type;
  // When not empty: the output head holds these vocabulary ids' rows (unique), in this order:
  // row r is id output_ids[r], and logit column r of a pass stands for that id (logit_ids()).
  // A draft's head in frequency order, so that the most frequent tokens are one contiguous
  // range of rows (FR-Spec: a VocabSubset of them is cheap); or only some ids, which cuts the
  // head. The embedding keeps every token.
  std::vector<int32_t> output_ids;
  // Threads that convert and pack the matrices at load (0: one per core, at most 8). The
  // packed copies are the same bytes for any count.
  int32_t load_threads = 0;
};

class Model {
 public:
  // Binds weights from an open file (which must outlive the model); validates every tensor's
  // presence, shape and type, throwing specdec::Error naming the tensor.
  static std::unique_ptr<Model> load(const gguf::GgufFile& file,
                                     const ModelLoadOptions& options = {});
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  // The vocabulary id of each output head row, so of each logit column of a pass without a
  // VocabSubset (ModelLoadOptions::output_ids); empty when column i is id i for every id.
  std::span<const int32_t> logit_ids() const { return output_ids_; }
  // Rows of the output head: logits per row of a pass without a VocabSubset.
  int32_t head_rows() const {
    return output_ids_.empty() ? config_.n_vocab : static_cast<int32_t>(output_ids_.size());
  }
  // Every tensor bound from the file, in the file's types (a tied head counted once).
  size_t weight_bytes() const { return weight_bytes_; }
  // What a one-token decode step streams of them: every matrix but the token embedding table, of
  // which a step reads one row (unless the output head is that table), and of the head the rows
  // it scores (head_rows()). The bandwidth a decode step achieves is this over its time.
  size_t decode_weight_bytes() const { return decode_weight_bytes_; }
  // Memory held by the row-interleaved copies of the matrices (model/weight_packing.h).
  size_t packed_weight_bytes() const { return packed_weight_bytes_; }
  // Mapped bytes handed back to the kernel after packing because only their packed copies are
  // read (model/source_pages.h).
  size_t released_weight_bytes() const { return released_weight_bytes_; }
  // Activation scratch allocated so far: it grows to the widest pass seen (a prefill chunk or a
  // verify pass), then stays, so the decode loop does not allocate.
  size_t scratch_bytes() const;

  // Runs tokens[i] at positions[i] (i < k) on top of cache (which grows by k) and writes the
  // logits of the rows listed in logit_rows (indices into tokens, ascending) to
  // logits_out[j * n_vocab ...]. Row j's result is bitwise independent of k, of the other
  // tokens in the call and of the thread count (batch invariance). Throws specdec::Error if
  // the cache would overflow or an argument is out of range; the cache is then unchanged.
  // Not reentrant: one forward() at a time per Model (it reuses scratch buffers).
  // With a vocabulary subset (made for this model's n_vocab), only those rows of the output
  // head are computed and logit row j is logits_out[j * vocab->width() ...], in the subset's id
  // order; each logit is bitwise what the full head gives for that id.
  void forward(std::span<const int32_t> tokens, std::span<const int32_t> positions, KvCache& cache,
               std::span<const int32_t> logit_rows, float* logits_out, ThreadPool& pool,
               const VocabSubset* vocab = nullptr);

  // One sequence's part of a multi-sequence pass: its new tokens and their positions, its own
  // cache, which of its rows want logits (ascending indices into its tokens), written to
  // logits_out like forward() writes them, and the vocabulary subset its logits are over
  // (nullptr: the whole vocabulary).
  // With hidden_out set, those rows give their hidden states instead of logits: the residual
  // stream after the final RMSNorm (what the output head multiplies, and what llama.cpp returns
  // as a token's embedding), n_embd floats per row at hidden_out[j * n_embd]; the output head
  // does not run for them and logits_out is not used.
  struct SequenceRows {
    std::span<const int32_t> tokens;
    std::span<const int32_t> positions;
    KvCache* cache = nullptr;
    std::span<const int32_t> logit_rows;
    float* logits_out = nullptr;
    const VocabSubset* vocab = nullptr;
    float* hidden_out = nullptr;
    // The scale of each LoRA adapter the model applies (lora(), in order) for this sequence's
    // rows; empty: the scales set_lora gave them. A scale of 0 leaves the adapter out of these
    // rows (they are the base model's where every scale is 0). A row's bits depend on its own
    // scales only, so sequences at different scales share a pass (llama-server's per-request
    // `lora`).
    std::span<const float> lora_scales = {};
  };
  // forward() for several sequences in one pass: every matmul runs once over all of their rows
  // (the weights are read once), attention runs per sequence over its own cache, and the output
  // head once per distinct vocabulary subset over its sequences' logit rows (a draft's subset
  // is per prompt, so its body is shared and only the subset's head rows are per sequence).
  // Each row's logits are bitwise what forward() gives that sequence alone (batch invariance,
  // now across sequences). The caches must be distinct; every argument is checked before
  // anything changes.
  void forward_batch(std::span<const SequenceRows> sequences, ThreadPool& pool);

  // LoRA adapters (model/lora.h) the blocks' matrices apply from the next pass on, each at its
  // scale; empty: none. Throws specdec::Error if an adapter was read for another shape.
  void set_lora(std::span<const ActiveLora> adapters);
  // The adapters applied (with their scales), and a fingerprint of them for what a KV cache
  // computed under them may be reused by (0 without adapters; lora_fingerprint(lora(), scales)
  // in model/lora.h for other scales).
  std::span<const ActiveLora> lora() const;
  uint64_t lora_fingerprint() const;

  struct Impl;  // weights and scratch, defined in model/model_impl.h

 protected:
  Model() = default;
  ModelConfig config_;
  size_t weight_bytes_ = 0;
  size_t decode_weight_bytes_ = 0;
  size_t packed_weight_bytes_ = 0;
  size_t released_weight_bytes_ = 0;
  std::vector<int32_t> output_ids_;  // ModelLoadOptions::output_ids
  std::shared_ptr<Impl> impl_;
};

}  // namespace specdec
