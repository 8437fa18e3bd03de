#include "speculative/hybrid_drafter.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

HybridDrafter::HybridDrafter(ModelDrafter& model, NgramDrafter& lookup, int32_t min_lookup)
    : model_(model), lookup_(lookup), min_lookup_(min_lookup) {
  if (min_lookup < 1) fail("hybrid drafter: min_lookup must be >= 1, got ", min_lookup);
}

void HybridDrafter::start(std::span<const int32_t> prompt, int32_t n_cached) {
  model_.start(prompt, n_cached);
  lookup_.start(prompt, n_cached);
  last_ = nullptr;
}

int32_t HybridDrafter::max_drafts(int32_t n) const {
  // The model's limit binds whenever the model drafts; a lookup round may be cut to it too,
  // which costs little and keeps one bound for the decoder.
  return std::min(model_.max_drafts(n), lookup_.max_drafts(n));
}

int32_t HybridDrafter::propose(std::span<const int32_t> committed, int32_t gamma,
                               const SamplingParams& params, Rng& rng, std::vector<int32_t>& drafts,
                               std::vector<Distribution>& q) {
  // The lookup draws nothing from rng (its q is one-hot), so trying it first leaves the random
  // stream as it was when the model drafts instead.
  const int32_t m = lookup_.propose(committed, gamma, params, rng, drafts, q);
  if (m >= min_lookup_) {
    last_ = &lookup_;
    ++lookup_rounds_;
    return m;
  }
  if (!model_allowed_) {  // a plain target step (the decoder's m == 0)
    last_ = nullptr;
    return 0;
  }
  last_ = &model_;
  ++model_rounds_;
  return model_.propose(committed, gamma, params, rng, drafts, q);
}

void HybridDrafter::finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                                 int32_t accepted) {
  // Only the drafter that proposed learns from the round; the model's cache simply stays behind
  // during lookup rounds and catches up (in one batched call) when it drafts next.
  if (last_ != nullptr) last_->finish_round(committed, n_before, m, accepted);
}

void HybridDrafter::discard_round(std::span<const int32_t> committed, int32_t n_before, int32_t m) {
  if (last_ != nullptr) last_->discard_round(committed, n_before, m);
}

}  // namespace specdec
