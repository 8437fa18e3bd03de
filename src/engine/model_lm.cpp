#include "engine/model_lm.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "engine/batch_coordinator.h"

namespace specdec {

ModelLM::ModelLM(Model& model, int32_t n_ctx, ThreadPool& pool, KvTypes kv_types)
    : model_(model), cache_(model.config(), n_ctx, kv_types), pool_(pool) {}

void ModelLM::forward(std::span<const int32_t> tokens, std::vector<float>& logits) {
  const auto k = static_cast<int32_t>(tokens.size());
  positions_.resize(k);
  std::iota(positions_.begin(), positions_.end(), cache_.length());
  rows_.resize(k);
  std::iota(rows_.begin(), rows_.end(), 0);
  logits.resize(static_cast<size_t>(k) * logit_width());
  run(tokens, logits.data());
}

void ModelLM::run(std::span<const int32_t> tokens, float* logits, float* hidden) {
  const VocabSubset* vocab = vocab_ ? &*vocab_ : nullptr;
  const Model::SequenceRows rows{tokens, positions_, &cache_, rows_,
                                 logits, vocab,      hidden,  lora_scales_};
  if (coordinator_ != nullptr) {
    coordinator_->forward(model_, rows);
  } else {
    model_.forward_batch(std::span<const Model::SequenceRows>(&rows, 1), pool_);
  }
}

bool ModelLM::forward_hidden(std::span<const int32_t> tokens, bool every_row,
                             std::vector<float>& hidden, const std::function<bool()>& go_on) {
  if (tokens.empty()) fail("forward_hidden: no tokens");
  const auto n = static_cast<int32_t>(tokens.size());
  const auto width = static_cast<size_t>(model_.config().n_embd);
  hidden.resize((every_row ? static_cast<size_t>(n) : 1) * width);
  for (size_t begin = 0; begin < tokens.size();) {
    if (begin > 0 && go_on && !go_on()) return false;
    const size_t end = std::min(tokens.size(), begin + prefill_chunk_);
    const auto k = static_cast<int32_t>(end - begin);
    positions_.resize(k);
    std::iota(positions_.begin(), positions_.end(), cache_.length());
    float* out = nullptr;
    if (every_row) {
      rows_.resize(k);
      std::iota(rows_.begin(), rows_.end(), 0);
      out = hidden.data() + begin * width;
    } else {
      rows_.assign(end == tokens.size() ? 1 : 0, k - 1);
      if (end == tokens.size()) out = hidden.data();
    }
    run(tokens.subspan(begin, end - begin), nullptr, out);
    begin = end;
  }
  return true;
}

void ModelLM::set_coordinator(BatchCoordinator* coordinator, int32_t prefill_chunk) {
  if (prefill_chunk < 1) fail("prefill chunk must be at least 1 token, got ", prefill_chunk);
  coordinator_ = coordinator;
  prefill_chunk_ = static_cast<size_t>(prefill_chunk);
}

void ModelLM::extend_from(const ModelLM& src, int32_t end) {
  if (&src.model_ != &model_) fail("a KV cache can only be copied between sequences of one model");
  cache_.extend_from(src.cache_, end);
}

void ModelLM::set_vocab_subset(std::optional<VocabSubset> subset) {
  if (subset && subset->head_rows() != model_.head_rows()) {
    fail("vocabulary subset made for a head of ", subset->head_rows(), " rows, the model's has ",
         model_.head_rows());
  }
  vocab_ = std::move(subset);
}

void ModelLM::set_prefix_hooks(std::function<void(int32_t)> copy_rows,
                               std::function<void()> chunk_read) {
  copy_rows_ = std::move(copy_rows);
  chunk_read_ = std::move(chunk_read);
}

void ModelLM::forward_last(std::span<const int32_t> tokens, std::vector<float>* last_logits) {
  // Long prompts go through in chunks so scratch memory stays bounded; chunking cannot change
  // any result because the forward pass is batch invariant.
  const int32_t start = cache_.length();
  const auto n = static_cast<int32_t>(tokens.size());
  // The last token's row is computed whenever its logits are wanted.
  const int32_t copyable = last_logits != nullptr ? n - 1 : n;
  for (size_t begin = 0; begin < tokens.size();) {
    if (copy_rows_) {
      const int32_t done = static_cast<int32_t>(begin);
      if (copyable > done) copy_rows_(copyable - done);
      const int32_t copied = cache_.length() - start - done;
      if (copied < 0 || copied > std::max(0, copyable - done)) {
        fail("a prefix copy left the cache at ", cache_.length(), ", expected ", start + done,
             " to ", start + copyable);
      }
      begin += static_cast<size_t>(copied);
      if (begin == tokens.size()) break;
    }
    const size_t end = std::min(tokens.size(), begin + prefill_chunk_);
    const auto k = static_cast<int32_t>(end - begin);
    positions_.resize(k);
    std::iota(positions_.begin(), positions_.end(), cache_.length());
    const bool want_logits = last_logits != nullptr && end == tokens.size();
    rows_.assign(want_logits ? 1 : 0, k - 1);
    if (want_logits) last_logits->resize(static_cast<size_t>(logit_width()));
    run(tokens.subspan(begin, end - begin), want_logits ? last_logits->data() : nullptr);
    begin = end;
    if (chunk_read_) chunk_read_();
  }
}

}  // namespace specdec
