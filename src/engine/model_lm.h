// Adapts a loaded Model plus its own KV cache to the CausalLM interface that the speculative
// decoder drives. Positions are explicit and always equal the cache slot: the sequence is
// contiguous from position 0.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "model/model.h"
#include "speculative/causal_lm.h"

namespace specdec {

class BatchCoordinator;
class ThreadPool;

class ModelLM final : public CausalLM {
 public:
  // n_ctx entries of KV cache in `kv_types` (model/kv_cache.h).
  ModelLM(Model& model, int32_t n_ctx, ThreadPool& pool, KvTypes kv_types = {});

  int32_t n_vocab() const override { return model_.config().n_vocab; }
  int32_t hidden_width() const { return model_.config().n_embd; }  // of forward_hidden's rows
  int32_t length() const override { return cache_.length(); }
  int32_t capacity() const override { return cache_.capacity(); }
  void truncate(int32_t n) override { cache_.truncate(n); }
  void forward(std::span<const int32_t> tokens, std::vector<float>& logits) override;
  std::span<const int32_t> logit_ids() const override {
    return vocab_ ? std::span<const int32_t>(vocab_->ids()) : model_.logit_ids();
  }
  // Score only this subset of the vocabulary from now on (a draft's frequency-ranked head);
  // nullopt: the whole head. The subset must be made for this model's head (its rows, in the
  // model's row order: Model::logit_ids()).
  void set_vocab_subset(std::optional<VocabSubset> subset);
  // The scale of each of the model's LoRA adapters for this sequence's passes from now on
  // (Model::SequenceRows::lora_scales); empty: the scales the model was given. Rows already in
  // the cache keep the scales they were computed at: the caller empties it when they differ.
  void set_lora_scales(std::vector<float> scales) { lora_scales_ = std::move(scales); }
  std::span<const float> lora_scales() const { return lora_scales_; }
  // Appends tokens but computes logits only for the last one (or none), in bounded chunks.
  void forward_last(std::span<const int32_t> tokens, std::vector<float>* last_logits) override;

  // Appends tokens, in chunks as forward_last does, and writes hidden states (Model::
  // SequenceRows::hidden_out: after the final norm, n_embd floats a row) to hidden: of every
  // new row, or of the last one only. No logits are computed. Before each chunk after the
  // first, go_on (if set) may stop the read: false is then returned, the cache holding the
  // chunks read. Throws for an empty span.
  bool forward_hidden(std::span<const int32_t> tokens, bool every_row, std::vector<float>& hidden,
                      const std::function<bool()>& go_on = {});

  const KvCache& cache() const { return cache_; }
  // The cache itself, for restoring saved entries into it (engine/slot_file.h): the entries are
  // all the state this sequence keeps between calls.
  KvCache& mutable_cache() { return cache_; }
  // Takes src's K/V for positions length()..end-1 instead of computing them: src (another
  // slot's sequence over the same model) holds them for the same tokens (KvCache::extend_from
  // says what the caller guarantees). Throws for another model.
  void extend_from(const ModelLM& src, int32_t end);

  // Prompt sharing across slots (Engine): before each forward_last chunk, copy_rows(max) may
  // extend the cache by at most max rows for that call's next tokens (via extend_from, from a
  // sequence that holds them), which the chunk then skips; after each chunk, chunk_read() may
  // offer the rows read so far. Either may be empty.
  void set_prefix_hooks(std::function<void(int32_t max)> copy_rows,
                        std::function<void()> chunk_read);

  // Route every forward pass through a coordinator (batched serving: engine/batch_coordinator.h)
  // and prefill in chunks of prefill_chunk tokens, so that a long prompt shares passes with the
  // other slots' decoding instead of stalling them. nullptr: run passes directly.
  void set_coordinator(BatchCoordinator* coordinator, int32_t prefill_chunk);

 private:
  Model& model_;
  KvCache cache_;
  ThreadPool& pool_;
  std::vector<int32_t> positions_, rows_;
  std::optional<VocabSubset> vocab_;
  std::vector<float> lora_scales_;
  BatchCoordinator* coordinator_ = nullptr;
  size_t prefill_chunk_ = 256;
  std::function<void(int32_t)> copy_rows_;
  std::function<void()> chunk_read_;

  void run(std::span<const int32_t> tokens, float* logits, float* hidden = nullptr);
};

}  // namespace specdec
