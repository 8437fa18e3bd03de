// What a verify pass costs: the time of one target forward pass over k = gamma + 1 tokens (all
// rows' logits, as verification needs them) on top of a cached prefix, relative to one decode
// step (k = 1) at the same position. Speculative decoding pays only when this ratio stays well
// below k; on a memory-bound model it should be close to 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec {

class Model;
class ThreadPool;

struct ForwardCost {
  int32_t k = 0;
  std::vector<double> ms;      // wall time, one per repeat
  std::vector<double> cpu_ms;  // CPU time of the calling thread, one per repeat
  double median_ms = 0;
  double ratio = 0;  // median_ms / the median of k = 1
  // The same from CPU time. With a 1-thread pool the caller does all the work, so this ratio is
  // what the kernels cost even on a machine busy with other processes (wall time is not).
  double median_cpu_ms = 0, cpu_ratio = 0;
};

// Runs prefix once, then for each repeat and each k in 1..k_max (rotating the order per repeat
// so drift touches all k alike) one forward pass of k tokens at positions prefix.size() ..,
// truncating the cache back after each. Throws specdec::Error for an empty prefix, k_max < 1,
// repeats < 1 or a prefix + k_max beyond the model's context.
std::vector<ForwardCost> measure_forward_costs(Model& model, std::span<const int32_t> prefix,
                                               int32_t k_max, int32_t repeats, ThreadPool& pool);

}  // namespace specdec
