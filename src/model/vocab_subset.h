// A subset of the vocabulary whose logits a forward pass computes, for drafts that score only
// the most frequent tokens (FR-Spec): the output head is the largest matrix of a small model
// (151,936 x 896 in Qwen2.5-0.5B, a third of its bytes), and rows outside the subset are never
// read. Speculative sampling stays exact for any draft distribution, so a draft whose q is zero
// outside the subset changes speed, never the output.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace specdec {

class VocabSubset {
 public:
  // The ids, rounded out to whole groups of 8 (the unit of a packed output head, so that every
  // logit is computed by the kernel that computes it without a subset): the subset holds every
  // id of every group of 8 that contains one of `ids`. ids need not be sorted or unique; each
  // must be in [0, n_vocab). Throws specdec::Error otherwise, or when ids is empty.
  static VocabSubset from_ids(std::span<const int32_t> ids, int32_t n_vocab);

  int32_t n_vocab() const { return n_vocab_; }
  // Logits per row: the ranges' ids concatenated in ascending order.
  int32_t width() const { return width_; }
  // Ascending, disjoint [begin, end) id ranges; begin is a multiple of 8, end one or n_vocab.
  const std::vector<std::pair<int32_t, int32_t>>& ranges() const { return ranges_; }
  // The id of each logit column, ascending (width() entries).
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  int32_t n_vocab_ = 0, width_ = 0;
  std::vector<std::pair<int32_t, int32_t>> ranges_;
  std::vector<int32_t> ids_;
};

}  // namespace specdec
