// Hybrid drafting: prompt lookup first, the draft model otherwise. When the text is copying
// earlier text (a summary restating its passage, code quoting the prompt), prompt lookup
// proposes the continuation for free; when it has nothing worth proposing, the draft model
// drafts as usual. Each round uses one of the two, chosen from the committed tokens alone (the
// lookup is deterministic), so the round's proposal is still a draw from a q that depends only
// on the past, and the rule stays exact (drafter.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "speculative/drafter.h"
#include "speculative/ngram_drafter.h"

namespace specdec {

// The shortest lookup proposal a hybrid round takes by default.
inline constexpr int32_t kHybridMinLookup = 2;

class HybridDrafter : public Drafter {
 public:
  // A round takes the lookup's proposal when it has at least min_lookup tokens (its adaptive
  // policy already dropped the ones unlikely to pay); otherwise the model drafts. Both drafters
  // must outlive this one.
  HybridDrafter(ModelDrafter& model, NgramDrafter& lookup, int32_t min_lookup = kHybridMinLookup);

  const char* kind() const override { return "hybrid"; }
  void start(std::span<const int32_t> prompt, int32_t n_cached) override;
  int32_t max_drafts(int32_t n) const override;
  int32_t propose(std::span<const int32_t> committed, int32_t gamma, const SamplingParams& params,
                  Rng& rng, std::vector<int32_t>& drafts, std::vector<Distribution>& q) override;
  void finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                    int32_t accepted) override;
  void discard_round(std::span<const int32_t> committed, int32_t n_before, int32_t m) override;
  void set_penalties(const TokenPenalties* penalties) override { model_.set_penalties(penalties); }
  // The lookup's one-hot drafts ignore it; the decoder cuts them at the first forbidden token.
  void set_constraint(TokenConstraint* constraint) override { model_.set_constraint(constraint); }

  // Whether a round the lookup does not take may fall to the model (default true). A caller
  // that finds the draft model's work not worth it (a batched server whose draft has a long
  // prompt still to read, engine.cpp) turns it off: the lookup's drafts cost no draft pass, so
  // rounds it proposes enough for still draft, and the others draft nothing. Lossless either way
  // (a round's drafts only change speed).
  void set_model_allowed(bool allowed) { model_allowed_ = allowed; }

  // Rounds each drafter proposed since construction (across sequences).
  int64_t lookup_rounds() const { return lookup_rounds_; }
  int64_t model_rounds() const { return model_rounds_; }

 private:
  ModelDrafter& model_;
  NgramDrafter& lookup_;
  int32_t min_lookup_;
  bool model_allowed_ = true;
  Drafter* last_ = nullptr;  // who proposed the current round
  int64_t lookup_rounds_ = 0, model_rounds_ = 0;
};

}  // namespace specdec
