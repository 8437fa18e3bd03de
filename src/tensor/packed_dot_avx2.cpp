// AVX2 block sums for the packed layouts (packed_blocks.h; the float side is the shared driver in
// packed_dot_x86.h). Per block and activation row, each 4-column chunk costs one broadcast load
// and one maddubs (Q8_0: plus a sign and a madd) for all 8 weight rows. Compiled with -mavx2
// -mfma -mf16c; raw intrinsics, no STL.
#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_x86.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// Integer block sums, per kind. Q4_1 accumulates a whole block in int16: each lane adds 8
// maddubs results of two products each, at most 8 * 2 * 15 * 127 = 30480. Q8_0 (|q| <= 128,
// through the sign trick |q| * (y * sign(q))) widens to int32 after every chunk. (Q8_0 as
// sign-extended int16 column pairs, one madd per pair and row, does fewer multiplies but more
// operations in all; it measured slower here.)

struct KindQ4_1 {
  using P = PackedQ4_1x8;
  using X = PackedActBlock;
  static constexpr bool kMin = true;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    // All 8 chunks unpacked first, then one activation row at a time: a short dependent chain
    // per row keeps the compiler from reassociating the int16 adds into a tree of spilled
    // temporaries (which it did when the rows were interleaved per chunk).
    __m256i q[8];
    for (int p = 0; p < 4; ++p) unpack_nibbles(b.qs + 32 * p, q[p], q[p + 4]);
    for (int t = 0; t < NR; ++t) {
      const int8_t* y = xb[t][i].qs;
      __m256i s16 = _mm256_maddubs_epi16(q[0], broadcast4(y));
      for (int c = 1; c < 8; ++c) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[c], broadcast4(y + 4 * c)));
        pin(s16);
      }
      sum[t] = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    }
  }
};

// Q4_0 and Q5_0: the unsigned codes q (in [0, 16) and [0, 32)) go into maddubs as they are, and
// offset * sum(y) is subtracted once per block, which is sum((q - offset) * y) exactly and saves
// the two sign operations per chunk that multiplying signed q - offset would need. Chunk c holds
// columns 4c .. 4c + 3: the low nibbles for c < 4, the high ones after. Bounds: Q4_0's whole
// block fits one int16 chain (8 * 2 * 15 * 127 = 30480). Q5_0's codes allow 4 chunks per chain
// (4 * 2 * 31 * 127 = 31496), so its block runs as two halves (chunks 0, 1, 4, 5, then 2, 3, 6,
// 7), which also keeps only half of the unpacked block in registers.
template <typename PackedBlock, bool kFive>
struct KindSmallOffset {
  using P = PackedBlock;
  using X = PackedActBlock;
  static constexpr bool kMin = false;
  static constexpr int kOffset = kFive ? 16 : 8;
  static constexpr int kHalves = kFive ? 2 : 1;
  static constexpr int kPerHalf = 4 / kHalves;  // 32-byte loads (= low/high chunk pairs)
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NR; ++t) sum[t] = _mm256_setzero_si256();
    for (int h = 0; h < kHalves; ++h) {
      // q[2j] and q[2j + 1]: chunks p and p + 4 of load p = h * kPerHalf + j.
      __m256i q[2 * kPerHalf];
      for (int j = 0; j < kPerHalf; ++j) {
        const int p = h * kPerHalf + j;
        unpack_nibbles(b.qs + 32 * p, q[2 * j], q[2 * j + 1]);
        if constexpr (kFive) {
          q[2 * j] = _mm256_or_si256(q[2 * j], bits_to_0x10(b.qh[p]));
          q[2 * j + 1] = _mm256_or_si256(q[2 * j + 1], bits_to_0x10(b.qh[p + 4]));
        }
      }
      for (int t = 0; t < NR; ++t) {
        const int8_t* y = xb[t][i].qs + 4 * h * kPerHalf;
        __m256i s16 = _mm256_maddubs_epi16(q[0], broadcast4(y));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[1], broadcast4(y + 16)));
        for (int j = 1; j < kPerHalf; ++j) {
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[2 * j], broadcast4(y + 4 * j)));
          s16 =
              _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[2 * j + 1], broadcast4(y + 16 + 4 * j)));
          pin(s16);
        }
        sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(s16, ones));
      }
    }
    for (int t = 0; t < NR; ++t) {
      sum[t] = _mm256_sub_epi32(sum[t], _mm256_set1_epi32(kOffset * xb[t][i].sum));
    }
  }
};

struct KindQ8_0 {
  using P = PackedQ8_0x8;
  using X = PackedActBlock;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NR; ++t) sum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
      const __m256i aq = _mm256_sign_epi8(q, q);
      for (int t = 0; t < NR; ++t) {
        const __m256i y = _mm256_sign_epi8(broadcast4(xb[t][i].qs + 4 * p), q);
        sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, y), ones));
        pin(sum[t]);
      }
    }
  }
};

}  // namespace

const PackedKernelTable& packed_kernels_avx2() {
  constexpr int kMaxGroup = 5;  // acc and sum per row plus the unpacked block: 16 registers
  static constexpr PackedKernelTable kTable = {
      multi_packed<KindSmallOffset<PackedQ4_0x8, false>, kMaxGroup>,
      multi_packed<KindQ4_1, kMaxGroup>,
      multi_packed<KindSmallOffset<PackedQ5_0x8, true>, kMaxGroup>,
      multi_packed<KindQ8_0, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
