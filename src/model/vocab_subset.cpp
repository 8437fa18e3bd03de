#include "model/vocab_subset.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

VocabSubset VocabSubset::from_ids(std::span<const int32_t> ids, int32_t n_vocab) {
  constexpr int32_t kGroup = 8;
  if (ids.empty()) fail("vocabulary subset: no ids");
  std::vector<int32_t> groups;
  groups.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab) {
      fail("vocabulary subset: id ", id, " outside the vocabulary [0, ", n_vocab, ")");
    }
    groups.push_back(id / kGroup);
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  VocabSubset s;
  s.n_vocab_ = n_vocab;
  for (int32_t g : groups) {
    const int32_t begin = g * kGroup, end = std::min(n_vocab, begin + kGroup);
    if (!s.ranges_.empty() && s.ranges_.back().second == begin) {
      s.ranges_.back().second = end;
    } else {
      s.ranges_.emplace_back(begin, end);
    }
  }
  for (auto [b, e] : s.ranges_) {
    for (int32_t id = b; id < e; ++id) s.ids_.push_back(id);
  }
  s.width_ = static_cast<int32_t>(s.ids_.size());
  return s;
}

}  // namespace specdec
