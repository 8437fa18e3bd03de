#include "tensor/weight_rows.h"

#include "common/error.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"

namespace specdec {

WeightMatrix weight_rows(const WeightMatrix& w, int64_t begin, int64_t end) {
  if (begin < 0 || end > w.rows || begin >= end) {
    fail("weight_rows: rows [", begin, ", ", end, ") out of range [0, ", w.rows, ")");
  }
  if (begin % kPackRows != 0 || (end != w.rows && end % kPackRows != 0)) {
    fail("weight_rows: rows [", begin, ", ", end, ") must start at a multiple of ", kPackRows,
         " and end at one or at the last row");
  }
  WeightMatrix v = w;
  v.rows = end - begin;
  // A requantized matrix whose rows all live in its packed copy has no data of its own.
  v.data = w.data != nullptr ? w.data + static_cast<size_t>(begin) * w.row_stride : nullptr;
  if (w.packed != nullptr) {
    // The packed copy stores groups of kPackRows rows back to back, so the groups before
    // `begin` take exactly the packed bytes of a matrix of `begin` rows.
    WeightMatrix head = w;
    head.rows = begin;
    v.packed = w.packed + packed_bytes(head);
  }
  return v;
}

}  // namespace specdec
