// AVX-512 VNNI block sums for the packed layouts (packed_blocks.h; the float side is the shared
// driver in packed_dot_x86.h). Compiled with AVX2/FMA/F16C plus AVX-512 F/BW/VL/VNNI; only
// reached through packed_kernels_avx512vnni() after cpu_has_avx512_vnni().
//
// vpdpbusd multiplies unsigned by signed bytes and adds each group of 4 products into an int32
// lane without saturating, so a 4-column chunk of 8 weight rows against one activation row is a
// single instruction (AVX2: maddubs, and for Q8_0 two sign operations and a madd more), with no
// int16 bound to respect. Weights go in as the unsigned operand: the 4/5-bit codes as they are
// (offset * sum(y) is subtracted per block, as on AVX2), Q8_0's signed q as q + 128 (q xor 0x80),
// with 128 * sum(y) subtracted per block. The integer block sums are the AVX2 path's exactly, so
// the outputs are the same bits.
//
// 32 vector registers (vs 16) leave room for 8 activation rows per call, so a verify pass of up
// to gamma = 7 reads each weight block once.
#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_x86.h"

namespace specdec {
namespace {

// Chunk c of a block holds columns 4c .. 4c + 3 of the 8 rows (packed_blocks.h): one dword per
// row, so the activation row's 4 bytes are broadcast to all 8 lanes. Chunk c goes into partial
// sum c % kParts: vpdpbusd has a latency of several cycles, and a single chain of 8 per row and
// block bounds the passes with few rows (a decode step's one row most of all). The parts are
// added exactly at the end of the block.
template <int NR>
constexpr int parts() {
  return NR == 1 ? 4 : NR == 2 ? 3 : NR <= 4 ? 2 : 1;
}

template <int NR>
struct BlockSums {
  static constexpr int kParts = parts<NR>();
  __m256i part[kParts][NR];

  BlockSums() {
    for (int p = 0; p < kParts; ++p) {
      for (int t = 0; t < NR; ++t) part[p][t] = _mm256_setzero_si256();
    }
  }
  void add_chunk(__m256i codes, const PackedActBlock* const* xb, int64_t i, int c) {
    for (int t = 0; t < NR; ++t) {
      part[c % kParts][t] =
          _mm256_dpbusd_epi32(part[c % kParts][t], codes, broadcast4(xb[t][i].qs + 4 * c));
    }
  }
  // The block sums, minus offset * sum(y) per row.
  void finish(const PackedActBlock* const* xb, int64_t i, int offset, __m256i* sum) const {
    for (int t = 0; t < NR; ++t) {
      __m256i s = part[0][t];
      for (int p = 1; p < kParts; ++p) s = _mm256_add_epi32(s, part[p][t]);
      sum[t] = offset != 0 ? _mm256_sub_epi32(s, _mm256_set1_epi32(offset * xb[t][i].sum)) : s;
    }
  }
};

// Q4_0 (offset 8), Q5_0 (offset 16) and Q4_1 (no offset: its min term is the driver's). Load p
// holds chunk p in its low nibbles and chunk p + 4 in its high ones; Q5_0's fifth bit of chunk
// s is bit i of qh[s] for byte i, set with one masked add.
template <typename PackedBlock, int kOffset, bool kFive, bool kHasMin>
struct KindNibbles {
  using P = PackedBlock;
  using X = PackedActBlock;
  static constexpr bool kMin = kHasMin;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    BlockSums<NR> bs;
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      unpack_nibbles(b.qs + 32 * p, lo, hi);
      if constexpr (kFive) {
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        lo = _mm256_mask_add_epi8(lo, static_cast<__mmask32>(b.qh[p]), lo, bit4);
        hi = _mm256_mask_add_epi8(hi, static_cast<__mmask32>(b.qh[p + 4]), hi, bit4);
      }
      bs.add_chunk(lo, xb, i, p);
      bs.add_chunk(hi, xb, i, p + 4);
    }
    bs.finish(xb, i, kOffset, sum);
  }
};

struct KindQ8_0 {
  using P = PackedQ8_0x8;
  using X = PackedActBlock;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& b, const X* const* xb, int64_t i, __m256i* sum) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    BlockSums<NR> bs;
    for (int c = 0; c < 8; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      bs.add_chunk(_mm256_xor_si256(q, bias), xb, i, c);  // q + 128 in [0, 255]
    }
    bs.finish(xb, i, 128, sum);
  }
};

}  // namespace

const PackedKernelTable& packed_kernels_avx512vnni() {
  constexpr int kMaxGroup = 8;
  static constexpr PackedKernelTable kTable = {
      multi_packed<KindNibbles<PackedQ4_0x8, 8, false, false>, kMaxGroup>,
      multi_packed<KindNibbles<PackedQ4_1x8, 0, false, true>, kMaxGroup>,
      multi_packed<KindNibbles<PackedQ5_0x8, 16, true, false>, kMaxGroup>,
      multi_packed<KindQ8_0, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
