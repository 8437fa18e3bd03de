// The AVX-512 VNNI form of q8_tile_scores (q8_rows.h). Per key tile and block, eight 64-byte
// loads each hold 4 values of all 16 rows; one vpdpbusd per load and query (the 4 query values
// broadcast) adds their products into the 16 rows' exact integer sums, so a tile costs
// dim / 4 multiply-accumulate instructions per query and no horizontal sums. Up to 8 queries
// (the grouped-query heads sharing a KV head) use each load. Then the same float combination
// as the scalar path, multiply then add in block order, 16 rows at once: the scalar bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tensor/q8_rows.h"

// GCC 12's 512-bit intrinsics without a mask start from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized then reports at every inlined use (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace specdec {
namespace {

constexpr int kMaxQueries = 8;

template <int NQ>
inline __attribute__((always_inline)) void tile_scores(const uint8_t* const* queries, int64_t dim,
                                                       const uint8_t* tile, __m512* acc) {
  const int64_t nb = dim / kQ8Block;
  for (int j = 0; j < NQ; ++j) acc[j] = _mm512_setzero_ps();
  const uint8_t* scales = tile + dim * kQ8TileRows;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i isum[NQ];
    for (int j = 0; j < NQ; ++j) isum[j] = _mm512_setzero_si512();
    for (int64_t e = 0; e < kQ8Block / 4; ++e) {
      const __m512i keys = _mm512_loadu_si512(tile + (b * (kQ8Block / 4) + e) * 64);
      for (int j = 0; j < NQ; ++j) {
        int32_t q4;
        std::memcpy(&q4, queries[j] + b * kQ8Block + e * 4, 4);
        isum[j] = _mm512_dpbusd_epi32(isum[j], keys, _mm512_set1_epi32(q4));
      }
    }
    const __m512 dk = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 2 * b * kQ8TileRows)));
    for (int j = 0; j < NQ; ++j) {
      float dq;
      int32_t qsum;
      std::memcpy(&dq, queries[j] + dim + 4 * b, 4);
      std::memcpy(&qsum, queries[j] + dim + 4 * (nb + b), 4);
      // The keys are stored plus 128: sum (k + 128) q = sum k q + 128 sum q.
      const __m512i exact = _mm512_sub_epi32(isum[j], _mm512_set1_epi32(128 * qsum));
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dq), dk);
      acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_cvtepi32_ps(exact), scale));
    }
  }
}

template <int NQ>
void scores(const uint8_t* queries, int64_t query_stride, const uint8_t* tiles, int64_t dim,
            int64_t first_row, int64_t n_rows, float* out, int64_t out_stride) {
  const uint8_t* q[NQ];
  for (int j = 0; j < NQ; ++j) q[j] = queries + j * query_stride;
  const size_t tile_size = q8_tile_bytes(dim);
  const int64_t end = first_row + n_rows;
  for (int64_t t = first_row / kQ8TileRows; t * kQ8TileRows < end; ++t) {
    const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_size;
    if ((t + 1) * kQ8TileRows < end) {
      _mm_prefetch(reinterpret_cast<const char*>(tile + tile_size), _MM_HINT_T0);
    }
    __m512 acc[NQ];
    tile_scores<NQ>(q, dim, tile, acc);
    const int64_t r0 = t * kQ8TileRows;
    const int64_t lo = std::max(first_row, r0), hi = std::min(end, r0 + kQ8TileRows);
    for (int j = 0; j < NQ; ++j) {
      float* o = out + j * out_stride + (lo - first_row);
      if (lo == r0 && hi == r0 + kQ8TileRows) {
        _mm512_storeu_ps(o, acc[j]);
      } else {
        alignas(64) float lanes[kQ8TileRows];
        _mm512_store_ps(lanes, acc[j]);
        std::copy(lanes + (lo - r0), lanes + (hi - r0), o);
      }
    }
  }
}

}  // namespace

void q8_tile_scores_avx512(const uint8_t* queries, int64_t query_stride, int64_t nq,
                           const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                           float* out, int64_t out_stride) {
  if (n_rows <= 0) return;
  for (int64_t j0 = 0; j0 < nq; j0 += kMaxQueries) {
    const uint8_t* q = queries + j0 * query_stride;
    float* o = out + j0 * out_stride;
    switch (std::min<int64_t>(kMaxQueries, nq - j0)) {
#define SPECDEC_Q8_CASE(N)                                                    \
  case N:                                                                     \
    scores<N>(q, query_stride, tiles, dim, first_row, n_rows, o, out_stride); \
    break;
      SPECDEC_Q8_CASE(1)
      SPECDEC_Q8_CASE(2)
      SPECDEC_Q8_CASE(3)
      SPECDEC_Q8_CASE(4)
      SPECDEC_Q8_CASE(5)
      SPECDEC_Q8_CASE(6)
      SPECDEC_Q8_CASE(7)
      SPECDEC_Q8_CASE(8)
#undef SPECDEC_Q8_CASE
      default:
        break;
    }
  }
}

}  // namespace specdec
