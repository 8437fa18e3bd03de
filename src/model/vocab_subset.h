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
  // Rows of a head of n_rows rows, rounded out to whole groups of 8 (the unit of a packed output
  // head, so that every logit is computed by the kernel that computes it without a subset): the
  // subset holds every row of every group of 8 that contains one of `rows`. rows need not be
  // sorted or unique; each must be in [0, n_rows). row_ids: the vocabulary id of each head row
  // (n_rows entries; a head stored in another order than the ids, Model::logit_ids()), or empty
  // when row r is id r. Throws specdec::Error on a bad row, or when rows is empty.
  static VocabSubset from_rows(std::span<const int32_t> rows, std::span<const int32_t> row_ids,
                               int32_t n_rows);
  // The same for a head whose row r is id r (n_vocab rows).
  static VocabSubset from_ids(std::span<const int32_t> ids, int32_t n_vocab) {
    return from_rows(ids, {}, n_vocab);
  }

  // Rows of the head the subset was made for (the vocabulary size for a whole id-ordered head).
  int32_t head_rows() const { return n_rows_; }
  // Logits per row: the ranges' rows concatenated in ascending row order.
  int32_t width() const { return width_; }
  // Ascending, disjoint [begin, end) row ranges; begin is a multiple of 8, end one or n_rows.
  const std::vector<std::pair<int32_t, int32_t>>& ranges() const { return ranges_; }
  // The vocabulary id of each logit column (width() entries); ascending for an id-ordered head.
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  int32_t n_rows_ = 0, width_ = 0;
  std::vector<std::pair<int32_t, int32_t>> ranges_;
  std::vector<int32_t> ids_;
};

}  // namespace specdec
