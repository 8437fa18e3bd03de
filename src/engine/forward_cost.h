// What a verify pass costs: the time of one target forward pass over k = gamma + 1 tokens (all
// rows' logits, as verification needs them) on top of a cached prefix, relative to one decode
// step (k = 1) at the same position. Speculative decoding pays only when this ratio stays well
// below k; on a memory-bound model it should be close to 1.
//
// And what a draft step costs: one decode step of each of several models (a target and the
// layouts of its draft), measured side by side, so that a draft's step relative to the target's
// is the cost c of one drafted token that the adaptive length rule and the analytic speedup use.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/vocab_subset.h"

namespace specdec {

class Model;
class ThreadPool;

struct ForwardCost {
  int32_t k = 0;
  std::vector<double> ms;      // wall time, one per repeat
  std::vector<double> cpu_ms;  // CPU time of the calling thread, one per repeat
  double median_ms = 0;
  double ratio = 0;  // median_ms / the median of k = 1 (measure_step_costs: of the first model)
  // The same from CPU time. With a 1-thread pool the caller does all the work, so this ratio is
  // what the kernels cost even on a machine busy with other processes (wall time is not).
  double median_cpu_ms = 0, cpu_ratio = 0;
};

// Runs prefix once, then for each repeat and each k in 1..k_max (rotating the order per repeat
// so drift touches all k alike) one forward pass of k tokens at positions prefix.size() ..,
// truncating the cache back after each, in a KV cache of kv_types. Throws specdec::Error for an
// empty prefix, k_max < 1, repeats < 1 or a prefix + k_max beyond the model's context.
std::vector<ForwardCost> measure_forward_costs(Model& model, std::span<const int32_t> prefix,
                                               int32_t k_max, int32_t repeats, ThreadPool& pool,
                                               KvTypes kv_types = {});

// A model whose decode step measure_step_costs times, scoring the whole head or a subset of it
// (a draft's frequency-ranked rows, engine/draft_vocab.h).
struct StepSubject {
  Model* model = nullptr;
  std::optional<VocabSubset> vocab;
  KvTypes kv_types = {};  // how this model's cache stores K and V
};

// One decode step (a one-token pass after the prefix, in each model's own cache) per subject and
// repeat, the subjects' order rotated per repeat; one entry per subject, k = 1, ratio relative to
// subjects[0]. Throws specdec::Error for no subjects, a null model, an empty prefix, repeats < 1
// or a prefix beyond a model's context.
std::vector<ForwardCost> measure_step_costs(std::span<const StepSubject> subjects,
                                            std::span<const int32_t> prefix, int32_t repeats,
                                            ThreadPool& pool);

}  // namespace specdec
