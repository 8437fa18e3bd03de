// AVX-512 forms of attention's several-query kernels (vec_ops.h); compiled with AVX-512
// F/BW/VL/VNNI, reached only when the active path is avx512vnni. Both give the bits of the
// AVX2 (and so the scalar) path; what changes is how often a cache row is read:
//
// - Scores: each (query, row) keeps the 8 partial sums of the one-query dot in one ymm and
//   updates them in the same order, multiply then add. With AVX-512's 32 vector registers a tile
//   holds 6 queries x 4 rows (24 accumulators), so a key row is read once for all 6 query heads
//   of a Qwen2.5 grouped-query head instead of once per 2.
// - Weighted sums: per element the same multiply-then-add over rows in order. zmm registers
//   cover 128 columns for 3 queries (24 accumulators), so a value row streams through whole and
//   contiguously, where the AVX2 tile reads a 64-byte piece of every row per pass (8 strided
//   passes over the cache for a 128-wide head).
// Attention at a 1,024-token depth spent about 0.5 ms per layer in the AVX2 forms on one Zen 4
// core (src/model/attention_bench.cpp), waiting for rows far more than computing.
#include <immintrin.h>

#include "tensor/score_tiles_x86.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

// NQ queries x NV zmm of columns over all rows: acc = acc + p * v per element, rows in order.
template <int NQ, int NV>
inline __attribute__((always_inline)) void weighted_tile(const float* p, int64_t p_stride,
                                                         const float* rows, int64_t stride,
                                                         int64_t n_rows, float* out,
                                                         int64_t out_stride) {
  __m512 acc[NQ][NV];
  for (int j = 0; j < NQ; ++j) {
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_loadu_ps(out + j * out_stride + 16 * v);
  }
  for (int64_t s = 0; s < n_rows; ++s) {
    const float* row = rows + s * stride;
    for (int v = 0; v < NV; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchRows * stride + 16 * v),
                   _MM_HINT_T0);
      const __m512 vv = _mm512_loadu_ps(row + 16 * v);
      for (int j = 0; j < NQ; ++j) {
        acc[j][v] =
            _mm512_add_ps(acc[j][v], _mm512_mul_ps(_mm512_set1_ps(p[j * p_stride + s]), vv));
      }
    }
  }
  for (int j = 0; j < NQ; ++j) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + j * out_stride + 16 * v, acc[j][v]);
  }
}

// All nq queries over NV zmm of columns, in tiles of at most 24 accumulators (6 queries at most).
template <int NV>
void weighted_columns(const float* p, int64_t p_stride, int64_t nq, const float* rows,
                      int64_t stride, int64_t n_rows, float* out, int64_t out_stride) {
  constexpr int kMaxQ = 24 / NV < 6 ? 24 / NV : 6;
  int64_t j = 0;
  for (; nq - j >= kMaxQ; j += kMaxQ) {
    weighted_tile<kMaxQ, NV>(p + j * p_stride, p_stride, rows, stride, n_rows, out + j * out_stride,
                             out_stride);
  }
  for (; j < nq; ++j) {
    weighted_tile<1, NV>(p + j * p_stride, p_stride, rows, stride, n_rows, out + j * out_stride,
                         out_stride);
  }
}

}  // namespace

void dot_rows_multi_f32_avx512(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                               int64_t stride, int64_t n_rows, int64_t dim, float* out,
                               int64_t out_stride) {
  if (dim % 8 != 0) {  // tails: the AVX2 form pads them as the one-query dot does
    dot_rows_multi_f32_avx2(q, q_stride, nq, rows, stride, n_rows, dim, out, out_stride);
    return;
  }
  int64_t j = 0;
  for (; nq - j >= 6; j += 6) {
    dot_queries<6>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                   out_stride);
  }
  using DotQueries =
      void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t);
  static constexpr DotQueries kFewer[] = {nullptr,        dot_queries<1>, dot_queries<2>,
                                          dot_queries<3>, dot_queries<4>, dot_queries<5>};
  if (j < nq) {
    kFewer[nq - j](q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                   out_stride);
  }
}

void weighted_sum_rows_multi_f32_avx512(const float* p, int64_t p_stride, int64_t nq,
                                        const float* rows, int64_t stride, int64_t n_rows,
                                        int64_t dim, float* out, int64_t out_stride) {
  int64_t d = 0;
  for (; d + 128 <= dim; d += 128) {
    weighted_columns<8>(p, p_stride, nq, rows + d, stride, n_rows, out + d, out_stride);
  }
  if (dim - d >= 64) {
    weighted_columns<4>(p, p_stride, nq, rows + d, stride, n_rows, out + d, out_stride);
    d += 64;
  }
  if (dim - d >= 32) {
    weighted_columns<2>(p, p_stride, nq, rows + d, stride, n_rows, out + d, out_stride);
    d += 32;
  }
  if (dim - d >= 16) {
    weighted_columns<1>(p, p_stride, nq, rows + d, stride, n_rows, out + d, out_stride);
    d += 16;
  }
  if (d < dim) {  // the last 15 columns or fewer: the AVX2 form's 8-wide and scalar tails
    weighted_sum_rows_multi_f32_avx2(p, p_stride, nq, rows + d, stride, n_rows, dim - d, out + d,
                                     out_stride);
  }
}

}  // namespace specdec
