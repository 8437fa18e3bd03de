// Views of a contiguous range of a weight matrix's rows, for computing only part of a product:
// a draft's output head over a subset of the vocabulary (FR-Spec), where the rows outside the
// subset are never read.
#pragma once

#include <cstdint>

#include "tensor/matmul.h"

namespace specdec {

// Rows [begin, end) of w as a matrix of their own, sharing w's data and its packed copy. begin
// must be a multiple of kPackRows (packed groups are never split) and end either w.rows or a
// multiple of kPackRows, so every row of the view goes through the same kernel as in w: the
// view's products are bitwise the rows of w's (tested). Throws specdec::Error otherwise.
WeightMatrix weight_rows(const WeightMatrix& w, int64_t begin, int64_t end);

}  // namespace specdec
