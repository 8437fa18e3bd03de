// Attention's score kernel for several queries, shared by vec_ops_avx2.cpp (tiles of up to 2
// queries, 16 vector registers) and vec_ops_avx512.cpp (up to 6, 32 registers). Each (query, row)
// keeps the 8 partial sums of the one-query dot (dot_rows_f32_avx2) in one ymm and updates them
// in the same order, multiply then add, so every score has the one-query bits whatever the tile.
// Only for the *_avx2.cpp / *_avx512.cpp files: everything is in an unnamed namespace, so each
// gets its own copy compiled for its instruction set.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "tensor/simd_avx2.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

// How far ahead, in cache rows, the attention kernels ask for the rows they will read: without
// it the first touch of each row stalled (at a 1,024-token depth attention took 13 ms per 28
// layers on one thread, 9 ms with it, before the whole-row value tiles; 8 rows ahead measured a
// little faster than 16).
constexpr int64_t kPrefetchRows = 8;

// NQ queries x 4 rows of scores (dim a multiple of 8): each row chunk loaded once for all NQ
// queries; 4 x NQ accumulators, 4 row chunks and one query chunk in registers.
template <int NQ>
inline __attribute__((always_inline)) void dot_tile(const float* q, int64_t q_stride,
                                                    const float* rows, int64_t stride, int64_t dim,
                                                    float* out, int64_t out_stride) {
  __m256 acc[NQ][4];
  for (int j = 0; j < NQ; ++j) {
    for (int r = 0; r < 4; ++r) acc[j][r] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < dim; i += 8) {
    if (i % 16 == 0) {
      for (int r = 0; r < 4; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(rows + (r + kPrefetchRows) * stride + i),
                     _MM_HINT_T0);
      }
    }
    __m256 kv[4];
    for (int r = 0; r < 4; ++r) kv[r] = _mm256_loadu_ps(rows + r * stride + i);
    for (int j = 0; j < NQ; ++j) {
      const __m256 qv = _mm256_loadu_ps(q + j * q_stride + i);
      for (int r = 0; r < 4; ++r) acc[j][r] = _mm256_add_ps(acc[j][r], _mm256_mul_ps(qv, kv[r]));
    }
  }
  for (int j = 0; j < NQ; ++j) {
    _mm_storeu_ps(out + j * out_stride, reduce8_x4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
  }
}

// NQ queries over n_rows rows: tiles of 4 rows, then the last rows one at a time through the
// one-query dot.
template <int NQ>
void dot_queries(const float* q, int64_t q_stride, const float* rows, int64_t stride,
                 int64_t n_rows, int64_t dim, float* out, int64_t out_stride) {
  int64_t s = 0;
  for (; s + 4 <= n_rows; s += 4) {
    dot_tile<NQ>(q, q_stride, rows + s * stride, stride, dim, out + s, out_stride);
  }
  for (; s < n_rows; ++s) {
    for (int j = 0; j < NQ; ++j) {
      dot_rows_f32_avx2(q + j * q_stride, rows + s * stride, stride, 1, dim,
                        out + j * out_stride + s);
    }
  }
}

}  // namespace
}  // namespace specdec
