#include "engine/model_lm.h"

#include <numeric>

#include "common/error.h"

namespace specdec {

ModelLM::ModelLM(Model& model, int32_t n_ctx, ThreadPool& pool)
    : model_(model), cache_(model.config(), n_ctx), pool_(pool) {}

void ModelLM::forward(std::span<const int32_t> tokens, std::vector<float>& logits) {
  const auto k = static_cast<int32_t>(tokens.size());
  positions_.resize(k);
  std::iota(positions_.begin(), positions_.end(), cache_.length());
  rows_.resize(k);
  std::iota(rows_.begin(), rows_.end(), 0);
  logits.resize(static_cast<size_t>(k) * logit_width());
  model_.forward(tokens, positions_, cache_, rows_, logits.data(), pool_,
                 vocab_ ? &*vocab_ : nullptr);
}

void ModelLM::set_vocab_subset(std::optional<VocabSubset> subset) {
  if (subset && subset->n_vocab() != n_vocab()) {
    fail("vocabulary subset made for ", subset->n_vocab(), " tokens, the model has ", n_vocab());
  }
  vocab_ = std::move(subset);
}

void ModelLM::forward_last(std::span<const int32_t> tokens, std::vector<float>* last_logits) {
  // Long prompts go through in chunks so scratch memory stays bounded; chunking cannot change
  // any result because the forward pass is batch invariant.
  constexpr size_t kChunk = 256;
  for (size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const size_t end = std::min(tokens.size(), begin + kChunk);
    const auto k = static_cast<int32_t>(end - begin);
    positions_.resize(k);
    std::iota(positions_.begin(), positions_.end(), cache_.length());
    const bool want_logits = last_logits != nullptr && end == tokens.size();
    rows_.assign(want_logits ? 1 : 0, k - 1);
    if (want_logits) last_logits->resize(static_cast<size_t>(logit_width()));
    model_.forward(tokens.subspan(begin, end - begin), positions_, cache_, rows_,
                   want_logits ? last_logits->data() : nullptr, pool_, vocab_ ? &*vocab_ : nullptr);
  }
}

}  // namespace specdec
