// AVX2 integer sums for the packed K-quants (packed_blocks.h; the driver and the unpacking are
// packed_dot_k_x86.h). Per chunk of 4 columns x 8 rows and activation row: one broadcast and one
// maddubs; the int16 pair sums of a row then meet its sub-block scale in one madd (lanes 2r and
// 2r + 1 both hold row r's scale), for all 8 rows at once. Compiled with -mavx2 -mfma -mf16c.
//
// int16 bounds (|y| <= 128): a maddubs lane is two products, at most 2 * 15 * 128 = 3840 for
// Q4_K, so a whole 32-column sub-block (8 chunks) is one chain (30720); Q5_K (codes < 32, 7936
// per maddubs) sums 4 chunks per chain (31744); Q6_K (codes < 64, 16128) sums 2 (32256).
#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_k_x86.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// Column offset, within a 32-column sub-block, of chunk k.
// Each sub-block (Q6_K: group of two) is unpacked in halves of two loads, 4 chunk vectors at a
// time, which leaves AVX2's 16 registers room for 4 activation rows' sums without spilling.
template <typename PackedBlock, bool kFive>
struct KindQ45 {
  using P = PackedBlock;
  static constexpr bool kMin = true;
  template <int NR>
  static void block_sums(const P& b, const PackedActBlockK* const* xb, int64_t i, __m256i* sumi,
                         __m256i* summ) {
    const KScales s(b.scales);
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m256i s16[NR];  // Q4_K: a row's whole sub-block (8 chunks) is one int16 chain
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i q[4];
        unpack_sub_block_half<P, kFive>(b, j, h, q);
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const int8_t* y = xb[t][i].qs + 32 * j;
          __m256i v = _mm256_maddubs_epi16(q[0], broadcast4(y + half_chunk_offset(h, 0)));
          if (!kFive && h == 1) v = _mm256_add_epi16(s16[t], v);
#pragma GCC unroll 4
          for (int c = 1; c < 4; ++c) {
            v = _mm256_add_epi16(
                v, _mm256_maddubs_epi16(q[c], broadcast4(y + half_chunk_offset(h, c))));
            pin(v);
          }
          s16[t] = v;
          // Q5_K: 4 chunks per chain (the int16 bound), so each half meets the scale.
          if (kFive || h == 1) {
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(v, scale_words(s, j)));
            pin(sumi[t]);  // else GCC keeps every madd result and sums them at the end
          }
        }
      }
    }
    // Mins: lane r of min_pair_words(q) is (m[2q], m[2q + 1]) of row r, times the pair of
    // sub-block sums of y.
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) summ[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int qq = 0; qq < 4; ++qq) {
      const __m256i m = min_pair_words(s, qq);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        summ[t] =
            _mm256_add_epi32(summ[t], _mm256_madd_epi16(m, broadcast4(xb[t][i].bsums32 + 2 * qq)));
      }
    }
  }
};

struct KindQ6 {
  using P = PackedQ6_Kx8;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& b, const PackedActBlockK* const* xb, int64_t i, __m256i* sumi,
                         __m256i*) {
    // Words (0, 1) and (2, 3) of each 32-bit lane, duplicated: sub-block 2g's and 2g + 1's scale.
    const __m256i even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1,
                                          0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i odd = _mm256_add_epi8(even, _mm256_set1_epi8(2));
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i pair = q6_scale_pairs(b, g);
      const __m256i sc0 = _mm256_shuffle_epi8(pair, even), sc1 = _mm256_shuffle_epi8(pair, odd);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i q[4];
        unpack_q6_group_half(b, g, h, q);
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const int8_t* y = xb[t][i].qs + 32 * g;
          // Chunks q[0], q[1]: sub-block 2g; q[2], q[3]: 2g + 1 (2 chunks per int16 chain).
          const __m256i s0 =
              _mm256_add_epi16(_mm256_maddubs_epi16(q[0], broadcast4(y + half_chunk_offset(h, 0))),
                               _mm256_maddubs_epi16(q[1], broadcast4(y + half_chunk_offset(h, 1))));
          const __m256i s1 =
              _mm256_add_epi16(_mm256_maddubs_epi16(q[2], broadcast4(y + half_chunk_offset(h, 2))),
                               _mm256_maddubs_epi16(q[3], broadcast4(y + half_chunk_offset(h, 3))));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s0, sc0));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s1, sc1));
          pin(sumi[t]);
        }
      }
    }
    // The codes' offset 32: sum over sub-blocks of sc * (sum of y), as pairs.
    __m256i off[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) off[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i pair = q6_scale_pairs(b, g);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        off[t] =
            _mm256_add_epi32(off[t], _mm256_madd_epi16(pair, broadcast4(xb[t][i].bsums + 2 * g)));
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(off[t], 5));
  }
};

}  // namespace

const PackedKKernelTable& packed_k_kernels_avx2() {
  constexpr int kMaxGroup = 4;  // 8 unpacked chunks, the scale and 4 rows' sums: 16 registers
  static constexpr PackedKKernelTable kTable = {
      multi_packed_k<KindQ45<PackedQ4_Kx8, false>, kMaxGroup>,
      multi_packed_k<KindQ45<PackedQ5_Kx8, true>, kMaxGroup>,
      multi_packed_k<KindQ6, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
