// The AVX2 form of q8_tile_scores (q8_rows.h), for CPUs without AVX-512 VNNI. AVX2's byte
// multiply (vpmaddubsw) saturates its 16-bit pair sums, which 255 x 127 products overflow, so the
// key bytes are widened to 16 bits and multiplied with vpmaddwd (exact 32-bit pair sums). Each
// 16-byte quarter of a 64-byte load holds 4 values of 4 rows; per block the pair sums are folded
// into the 16 rows' exact integer sums, then combined in floats exactly as the scalar path does.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tensor/q8_rows.h"

namespace specdec {

void q8_tile_scores_avx2(const uint8_t* queries, int64_t query_stride, int64_t nq,
                         const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                         float* out, int64_t out_stride) {
  if (n_rows <= 0) return;
  const int64_t nb = dim / kQ8Block;
  const size_t tile_size = q8_tile_bytes(dim);
  const int64_t end = first_row + n_rows;
  for (int64_t t = first_row / kQ8TileRows; t * kQ8TileRows < end; ++t) {
    const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_size;
    const uint8_t* scales = tile + dim * kQ8TileRows;
    const int64_t r0 = t * kQ8TileRows;
    const int64_t lo = std::max(first_row, r0), hi = std::min(end, r0 + kQ8TileRows);
    for (int64_t j = 0; j < nq; ++j) {
      const uint8_t* query = queries + j * query_stride;
      __m256 acc_lo = _mm256_setzero_ps(), acc_hi = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        // part[m]: rows 4m..4m+3, two pair sums each, in that order.
        __m256i part[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        for (int64_t e = 0; e < kQ8Block / 4; ++e) {
          int32_t q4;
          std::memcpy(&q4, query + b * kQ8Block + e * 4, 4);
          const __m256i q16 = _mm256_cvtepi8_epi16(_mm_set1_epi32(q4));
          const uint8_t* keys = tile + (b * (kQ8Block / 4) + e) * 64;
          for (int m = 0; m < 4; ++m) {
            const __m256i k16 = _mm256_cvtepu8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys + 16 * m)));
            part[m] = _mm256_add_epi32(part[m], _mm256_madd_epi16(k16, q16));
          }
        }
        // hadd gives [r0 r1 r4 r5 | r2 r3 r6 r7]; the 64-bit permute puts the rows in order.
        const __m256i rows_lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(part[0], part[1]), 0xD8);
        const __m256i rows_hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(part[2], part[3]), 0xD8);
        float dq;
        int32_t qsum;
        std::memcpy(&dq, query + dim + 4 * b, 4);
        std::memcpy(&qsum, query + dim + 4 * (nb + b), 4);
        const __m256i bias = _mm256_set1_epi32(128 * qsum);
        const uint8_t* sb = scales + 2 * b * kQ8TileRows;
        const __m256 dk_lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb)));
        const __m256 dk_hi =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 16)));
        const __m256 dqv = _mm256_set1_ps(dq);
        acc_lo =
            _mm256_add_ps(acc_lo, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(rows_lo, bias)),
                                                _mm256_mul_ps(dqv, dk_lo)));
        acc_hi =
            _mm256_add_ps(acc_hi, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(rows_hi, bias)),
                                                _mm256_mul_ps(dqv, dk_hi)));
      }
      alignas(32) float lanes[kQ8TileRows];
      _mm256_store_ps(lanes, acc_lo);
      _mm256_store_ps(lanes + 8, acc_hi);
      std::copy(lanes + (lo - r0), lanes + (hi - r0), out + j * out_stride + (lo - first_row));
    }
  }
}

void dequantize_q8_rows_avx2(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0,
                             int64_t nd, float* out) {
  const size_t row_size = q8_row_bytes(dim);
  for (int64_t s = 0; s < n_rows; ++s) {
    const uint8_t* row = rows + static_cast<size_t>(s) * row_size;
    float* o = out + s * nd;
    for (int64_t i = 0; i < nd; i += kQ8Block) {
      const int64_t b = (d0 + i) / kQ8Block;
      uint16_t d16;
      std::memcpy(&d16, row + dim + 2 * b, 2);
      const __m256 scale = _mm256_set1_ps(_cvtsh_ss(d16));
      for (int64_t part = 0; part < kQ8Block; part += 8) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + d0 + i + part));
        const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
        _mm256_storeu_ps(o + i + part, _mm256_mul_ps(scale, v));
      }
    }
  }
}

}  // namespace specdec
