// AVX2 kernels for the packed layouts (packed_blocks.h). Per block and activation row, each
// 4-column chunk of the 4- and 5-bit formats costs one broadcast load and one maddubs for all 8
// weight rows (Q8_0: one madd per 2 columns); the block's int -> float conversion, scale
// multiply and accumulate are done for the 8 rows at once. Compiled with -mavx2 -mfma -mf16c;
// raw intrinsics, no STL.
//
// Every float operation is an explicit intrinsic in the order of packed_dot_scalar.cpp, so the
// two give identical bits, and an output never depends on how many activation rows share a
// call (the NR rows of a call keep separate accumulators).
#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// Integer block sums, per kind. Q4_1 accumulates a whole block in int16: each lane adds 8
// maddubs results of two products each, at most 8 * 2 * 15 * 127 = 30480.

struct KindQ4_1 {
  using P = PackedQ4_1x8;
  using X = PackedActBlock;
  static constexpr bool kMin = true;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    // All 8 chunks unpacked first, then one activation row at a time: a short dependent chain
    // per row keeps the compiler from reassociating the int16 adds into a tree of spilled
    // temporaries (which it did when the rows were interleaved per chunk).
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i q[8];
    for (int p = 0; p < 4; ++p) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
      q[p] = _mm256_and_si256(raw, low4);
      q[p + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    }
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
// the two sign operations per chunk that multiplying signed q - offset would need. Bounds:
// Q4_0's whole block fits one int16 chain (8 * 2 * 15 * 127 = 30480); Q5_0's codes allow 4
// chunks per chain (4 * 2 * 31 * 127 = 31496), so its block takes two.
template <typename PackedBlock, bool kFive>
struct KindSmallOffset {
  using P = PackedBlock;
  using X = PackedActBlock;
  static constexpr bool kMin = false;
  static constexpr int kOffset = kFive ? 16 : 8;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    // Chunk c holds columns 4c .. 4c + 3: the low nibbles for c < 4, the high ones after.
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i q[8];
    for (int p = 0; p < 4; ++p) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
      q[p] = _mm256_and_si256(raw, low4);
      q[p + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (kFive) {
        q[p] = _mm256_or_si256(q[p], bits_to_0x10(b.qh[p]));
        q[p + 4] = _mm256_or_si256(q[p + 4], bits_to_0x10(b.qh[p + 4]));
      }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NR; ++t) {
      const int8_t* y = xb[t][i].qs;
      __m256i s32;
      if constexpr (kFive) {
        __m256i lo = _mm256_maddubs_epi16(q[0], broadcast4(y));
        __m256i hi = _mm256_maddubs_epi16(q[4], broadcast4(y + 16));
        for (int c = 1; c < 4; ++c) {
          lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(q[c], broadcast4(y + 4 * c)));
          hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(q[c + 4], broadcast4(y + 16 + 4 * c)));
          pin(lo);
          pin(hi);
        }
        s32 = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
      } else {
        __m256i s16 = _mm256_maddubs_epi16(q[0], broadcast4(y));
        for (int c = 1; c < 8; ++c) {
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[c], broadcast4(y + 4 * c)));
          pin(s16);
        }
        s32 = _mm256_madd_epi16(s16, ones);
      }
      sum[t] = _mm256_sub_epi32(s32, _mm256_set1_epi32(kOffset * xb[t][i].sum));
    }
  }
};

// Q8_0: each 16-byte pair of the block (2 columns x 8 rows) is sign-extended to int16 once and
// multiplied by one broadcast int16 pair per activation row: one madd and one add per 2 columns
// and row, exact in int32 (|q| <= 128, |y| <= 127).
struct KindQ8_0 {
  using P = PackedQ8_0x8;
  using X = PackedActBlock16;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    for (int t = 0; t < NR; ++t) sum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 16; ++p) {
      const __m256i q =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * p)));
      for (int t = 0; t < NR; ++t) {
        sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(q, broadcast4(xb[t][i].qs + 2 * p)));
        pin(sum[t]);
      }
    }
  }
};

template <typename K>
struct Packed {
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    using P = typename K::P;
    using X = typename K::X;
    const auto* wb = reinterpret_cast<const P*>(w);
    const X* xb[NR];
    // One accumulator per activation row: the block term and (Q4_1) the min term are added
    // into it one after the other, which leaves registers for 5 rows.
    __m256 acc[NR];
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const X*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      __m256i sum[NR];
      K::template block_sums<NR>(wb[i], xb, i, sum);
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].d)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (K::kMin) {
        mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].m)));
      }
      for (int t = 0; t < NR; ++t) {
        const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(&xb[t][i].d));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), scale, acc[t]);
        if constexpr (K::kMin) {
          acc[t] = _mm256_fmadd_ps(mw, _mm256_broadcast_ss(&xb[t][i].s), acc[t]);
        }
      }
    }
    for (int t = 0; t < NR; ++t) _mm256_storeu_ps(out + t * os, acc[t]);
  }
};

// Activation rows in groups of at most 5 (the register budget), split evenly (6 = 3 + 3, not
// 5 + 1) so the weight unpacking is shared as widely as possible; a verify pass at gamma = 4 is
// one group.
template <typename K>
void multi_packed(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx, float* out,
                  int64_t os) {
  int64_t t = 0;
  while (t < nx) {
    const int64_t left = nx - t, groups = (left + 4) / 5, nr = (left + groups - 1) / groups;
    const uint8_t* xt = x + static_cast<size_t>(t) * xs;
    float* ot = out + t * os;
    if (nr == 5) Packed<K>::template run<5>(n, w, xt, xs, ot, os);
    if (nr == 4) Packed<K>::template run<4>(n, w, xt, xs, ot, os);
    if (nr == 3) Packed<K>::template run<3>(n, w, xt, xs, ot, os);
    if (nr == 2) Packed<K>::template run<2>(n, w, xt, xs, ot, os);
    if (nr == 1) Packed<K>::template run<1>(n, w, xt, xs, ot, os);
    t += nr;
  }
}

}  // namespace

const PackedKernelTable& packed_kernels_avx2() {
  static constexpr PackedKernelTable kTable = {
      multi_packed<KindSmallOffset<PackedQ4_0x8, false>>,
      multi_packed<KindQ4_1>,
      multi_packed<KindSmallOffset<PackedQ5_0x8, true>>,
      multi_packed<KindQ8_0>,
  };
  return kTable;
}

}  // namespace specdec
