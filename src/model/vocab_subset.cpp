#include "model/vocab_subset.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

VocabSubset VocabSubset::from_rows(std::span<const int32_t> rows, std::span<const int32_t> row_ids,
                                   int32_t n_rows) {
  constexpr int32_t kGroup = 8;
  const int32_t n_vocab = n_rows;
  if (rows.empty()) fail("vocabulary subset: no ids");
  if (!row_ids.empty() && static_cast<int64_t>(row_ids.size()) != n_rows) {
    fail("vocabulary subset: ", row_ids.size(), " row ids for a head of ", n_rows, " rows");
  }
  std::vector<int32_t> groups;
  groups.reserve(rows.size());
  for (int32_t id : rows) {
    if (id < 0 || id >= n_vocab) {
      fail("vocabulary subset: row ", id, " outside the head's rows [0, ", n_vocab, ")");
    }
    groups.push_back(id / kGroup);
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  VocabSubset s;
  s.n_rows_ = n_rows;
  for (int32_t g : groups) {
    const int32_t begin = g * kGroup, end = std::min(n_vocab, begin + kGroup);
    if (!s.ranges_.empty() && s.ranges_.back().second == begin) {
      s.ranges_.back().second = end;
    } else {
      s.ranges_.emplace_back(begin, end);
    }
  }
  for (auto [b, e] : s.ranges_) {
    for (int32_t r = b; r < e; ++r) {
      s.ids_.push_back(row_ids.empty() ? r : row_ids[static_cast<size_t>(r)]);
    }
  }
  s.width_ = static_cast<int32_t>(s.ids_.size());
  return s;
}

}  // namespace specdec
