#include "sampling/rank_order.h"

#include <algorithm>
#include <numeric>

namespace specdec {

void select_top_k(std::span<const float> logits, int32_t k, std::vector<int32_t>& ids) {
  const RanksBefore before{logits.data()};
  const auto n = static_cast<int32_t>(logits.size());
  ids.resize(static_cast<size_t>(k));
  std::iota(ids.begin(), ids.end(), 0);
  if (static_cast<int64_t>(k) * 8 > n) {
    // Large k: a heap would churn; quickselect over all ids is O(n) as well.
    ids.resize(static_cast<size_t>(n));
    std::iota(ids.begin() + k, ids.end(), k);
    std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), before);
    ids.resize(static_cast<size_t>(k));
    return;
  }
  // Heap of the best k seen so far with the worst at the front. Later ids lose ties to every id
  // already in the heap, so the scan only needs a strict > against the front's logit.
  std::make_heap(ids.begin(), ids.end(), before);
  float threshold = logits[static_cast<size_t>(ids.front())];
  for (int32_t i = k; i < n; ++i) {
    if (logits[static_cast<size_t>(i)] > threshold) {
      std::pop_heap(ids.begin(), ids.end(), before);
      ids.back() = i;
      std::push_heap(ids.begin(), ids.end(), before);
      threshold = logits[static_cast<size_t>(ids.front())];
    }
  }
}

}  // namespace specdec
