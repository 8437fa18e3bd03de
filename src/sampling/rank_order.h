// The order every filter keeps a prefix of: descending logit, ties to the ascending id (dividing
// by T > 0 and exp are monotone, so it is also the order of the probabilities).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec {

// Strict total order "a ranks before b": higher logit first, then the lower id.
struct RanksBefore {
  const float* logit;
  bool operator()(int32_t a, int32_t b) const {
    return logit[a] > logit[b] || (logit[a] == logit[b] && a < b);
  }
};

// Leaves the k best ids (unordered) in ids; 1 <= k <= logits.size(), no NaN logits. O(n): a
// heap of the best k with one comparison per id for small k, quickselect for large k.
void select_top_k(std::span<const float> logits, int32_t k, std::vector<int32_t>& ids);

}  // namespace specdec
