// Matrix products of a weight matrix (any supported GgmlType) with k activation rows.
//
// Batch invariance is the contract: out[t][r] is bitwise the same whatever k is, whichever
// other rows share the call, and whatever the thread count, because each output element is
// one dot product computed by the same kernel in the same reduction order. That is what lets
// greedy speculative decoding reproduce target-only output exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/ggml_type.h"

namespace specdec {

class ThreadPool;

// rows x cols weight, row-major: row r starts at data + r * row_stride (GGUF: dims[0] = cols).
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;  // bytes
  // Optional row-interleaved copy of the full groups of 8 rows (packed_weights.h); when set,
  // matmul computes those rows from it on every path. data stays the source of truth for
  // embedding lookups and for the rows past the last full group.
  const uint8_t* packed = nullptr;
};

// out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c], for t in [0, k), r in [0, w.rows).
void matmul(const WeightMatrix& w, const float* x, int64_t k, float* out, ThreadPool& pool);

// One product of matmul_group: out receives w times the shared activations, laid out as matmul.
struct MatmulTarget {
  const WeightMatrix* w = nullptr;
  float* out = nullptr;
};

// Bitwise the same as matmul(*t.w, x, k, t.out, pool) for each target, but the activation rows
// are quantized once and the weight rows of all targets are split over the threads in one
// parallel_for (one hand-off instead of one per matrix: Q/K/V, or FFN gate and up). All targets
// must have the same type and column count.
void matmul_group(std::span<const MatmulTarget> targets, const float* x, int64_t k,
                  ThreadPool& pool);

// Dequantizes row r of w into dst (w.cols floats); used for embedding lookups.
void dequantize_row(const WeightMatrix& w, int64_t r, float* dst);

}  // namespace specdec
