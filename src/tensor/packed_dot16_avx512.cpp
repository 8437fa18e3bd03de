// The packed 32-column kernels (Q4_0, Q4_1, Q5_0, Q8_0) on 512-bit vectors: two adjacent 8-row
// groups (16 weight rows) per call, one zmm lane per weight row. The integer block sums are the
// 8-row kernels' (packed_dot_avx512.cpp) exactly and the float steps are the shared driver's
// (packed_dot_x86.h: scale = d_w * d_x, acc += float(sum) * scale, Q4_1's acc += m_w * s_x, each
// fused or rounded as there) lane for lane, so a row's output is the same bits whichever kernel
// computed it.
//
// Why: the draft model of a speculative pair is often one of these formats (the Qwen2.5-Coder
// 0.5B is Q5_0), and it reads the prompt before it drafts, and in a batched server drafts for
// several slots per pass; there the 8-row kernels, whose 256-bit vpdpbusd does half the work of
// a 512-bit one, ran at 58-67 G multiply-adds per second on one core of the 2-core Intel Xeon
// VM with 9 activation rows (bench_tensor MatmulPacked, 4864 x 896 Q5_0 / Q4_0; Q4_K's 16-row
// kernel: 99-121). The block's float work (one convert, multiply and fused add per 32 columns
// and row) is also done for 16 rows per instruction instead of 8.
//
// Compiled with AVX2/FMA/F16C plus AVX-512 F/BW/VL/VNNI; only reached after
// cpu_has_avx512_vnni().
// GCC 12's 512-bit intrinsics without a mask start from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized then reports at every inlined use (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_k_x86.h"
#include "tensor/packed_pair_avx512.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// The integer block sums of 16 weight rows against NR activation rows: chunk c (columns 4c ..
// 4c + 3) goes into chain c % kParts; a row's first chain starts from -offset * sum(y), the
// term the 8-row kernels subtract at the end (the same int32 result: no partial sum comes near
// the int32 range).
template <int NR>
struct BlockSums16 {
  static constexpr int kParts = chains_per_row<NR, 8, kInFlight>();
  __m512i part[kParts][NR];

  BlockSums16(const PackedActBlock* const* xb, int64_t i, int offset) {
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      part[0][t] = offset != 0 ? _mm512_set1_epi32(-offset * xb[t][i].sum) : _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int p = 1; p < kParts; ++p) part[p][t] = _mm512_setzero_si512();
    }
  }
  void add_chunk(__m512i codes, const PackedActBlock* const* xb, int64_t i, int c) {
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      part[c % kParts][t] = dpbusd_bcast(part[c % kParts][t], codes, xb[t][i].qs + 4 * c);
    }
  }
  void finish(__m512i* sum) const {
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      __m512i s = part[0][t];
#pragma GCC unroll 16
      for (int p = 1; p < kParts; ++p) s = _mm512_add_epi32(s, part[p][t]);
      sum[t] = s;
    }
  }
};

// Q4_0 (offset 8), Q5_0 (offset 16) and Q4_1 (no offset: its min term is the driver's). Load p
// of a group holds chunk p in its low nibbles and chunk p + 4 in its high ones; Q5_0's fifth bit
// of chunk s is bit i of qh[s] for byte i, both groups' bits one 64-bit mask.
template <typename PackedBlock, int kOffset, bool kFive, bool kHasMin>
struct KindNibbles16 {
  using P = PackedBlock;
  static constexpr bool kMin = kHasMin;
  template <int NR>
  static void block_sums(const P& a, const P& b, const PackedActBlock* const* xb, int64_t i,
                         __m512i* sum) {
    BlockSums16<NR> bs(xb, i, kOffset);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i lo, hi;
      unpack_nibbles_pair(a.qs + 32 * p, b.qs + 32 * p, lo, hi);
      if constexpr (kFive) {
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        const auto mask = [&](int s) {
          return static_cast<__mmask64>(a.qh[s]) | (static_cast<__mmask64>(b.qh[s]) << 32);
        };
        lo = _mm512_mask_add_epi8(lo, mask(p), lo, bit4);
        hi = _mm512_mask_add_epi8(hi, mask(p + 4), hi, bit4);
      }
      bs.add_chunk(lo, xb, i, p);
      bs.add_chunk(hi, xb, i, p + 4);
    }
    bs.finish(sum);
  }
};

// Q8_0: the signed q goes in as the unsigned q + 128 (q xor 0x80), 128 * sum(y) taken off.
struct KindQ8_016 {
  using P = PackedQ8_0x8;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& a, const P& b, const PackedActBlock* const* xb, int64_t i,
                         __m512i* sum) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    BlockSums16<NR> bs(xb, i, 128);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      bs.add_chunk(_mm512_xor_si512(load_pair(a.qs + 32 * c, b.qs + 32 * c), bias), xb, i, c);
    }
    bs.finish(sum);
  }
};

// The 16-row driver: w is two consecutive 8-row groups of n / 32 packed blocks each; out[t * os
// + r] for r < 16 is weight row r (group a's 8, then group b's) against activation row t. The
// float steps are Packed<K>::run's (packed_dot_x86.h) lane for lane.
template <typename K>
struct Packed16 {
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    using P = typename K::P;
    const int64_t nb = n / kQK;
    const auto* wa = reinterpret_cast<const P*>(w);
    const P* wb = wa + nb;
    const PackedActBlock* xb[NR];
    __m512 acc[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const PackedActBlock*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      prefetch_pair(wa, wb, nb, i);
      __m512i sum[NR];
      K::template block_sums<NR>(wa[i], wb[i], xb, i, sum);
      const __m512 dw = halfs_pair(wa[i].d, wb[i].d);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(xb[t][i].d));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), scale, acc[t]);
      }
      if constexpr (K::kMin) {
        const __m512 mw = halfs_pair(wa[i].m, wb[i].m);
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xb[t][i].s), acc[t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) _mm512_storeu_ps(out + t * os, acc[t]);
  }
};

template <typename K, int kMaxGroup>
void multi_packed16(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx,
                    float* out, int64_t os) {
  multi_packed_with<Packed16<K>, kMaxGroup>(n, w, x, xs, nx, out, os);
}

}  // namespace

const PackedKernelTable& packed16_kernels_avx512vnni() {
  constexpr int kMaxGroup = 9;
  static constexpr PackedKernelTable kTable = {
      multi_packed16<KindNibbles16<PackedQ4_0x8, 8, false, false>, kMaxGroup>,
      multi_packed16<KindNibbles16<PackedQ4_1x8, 0, false, true>, kMaxGroup>,
      multi_packed16<KindNibbles16<PackedQ5_0x8, 16, true, false>, kMaxGroup>,
      multi_packed16<KindQ8_016, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
