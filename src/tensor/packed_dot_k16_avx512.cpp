// The packed K-quant kernels on 512-bit vectors: two adjacent 8-row groups (16 weight rows) per
// call, one zmm lane per weight row. The arithmetic per lane is the 8-row kernels' exactly
// (packed_dot_k_avx512.cpp: the same integer sums, then the same float multiply and fused adds
// in the same order), so a row's output is the same bits whichever kernel computed it.
//
// Why: a verify pass or a prefill runs these with 2-16 activation rows, and there they are
// bound by their integer work, not by memory (on the Emerald Rapids VM at about half of what
// vpdpbusd alone issues: bench_tensor Vpdpbusd, docs/benchmarks.md). On Zen 4 a 512-bit
// vpdpbusd is one macro-op that does twice the work of a 256-bit one; a microbenchmark with 9
// independent accumulator chains (the shape of a 9-row pass) issued 3.5 G/s 512-bit against
// 4.8 G/s 256-bit ones on one core, 1.45x the multiply-adds per second. The unpacking of the
// weights is shared by 16 rows instead of 8 as well.
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
#include "tensor/packed_k_pair_avx512.h"
#include "tensor/packed_pair_avx512.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// Keeps GCC from reassociating a row's running sum across sub-blocks (see the 8-row file).
inline void pin_v(__m512i& v) { asm("" : "+v"(v)); }

// Sum over chunks [k0, k0 + N) of q[k] . y, split into kParts chains, added exactly at the end.
template <int N, int kParts>
inline __m512i dot_chunks(const __m512i* q, const int8_t* y, int k0) {
  __m512i part[kParts];
#pragma GCC unroll 16
  for (int p = 0; p < kParts; ++p) part[p] = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int k = k0; k < k0 + N; ++k) {
    part[(k - k0) % kParts] = dpbusd_bcast(part[(k - k0) % kParts], q[k], y + chunk_offset(k));
  }
  __m512i s = part[0];
#pragma GCC unroll 16
  for (int p = 1; p < kParts; ++p) s = _mm512_add_epi32(s, part[p]);
  return s;
}

// Each 32-bit lane of lo and hi holds a value that fits an int16: the lane's int16 pair
// (lo's, hi's), for vpdpwssd. One merge-masked vpshufb (port 5): hi's low word moves into the
// high word over lo's sign bits.
inline __m512i words_pair(__m512i lo, __m512i hi) {
  const __m512i low_word_up = _mm512_set4_epi32(0x0d0c0000, 0x09080000, 0x05040000, 0x01000000);
  return _mm512_mask_shuffle_epi8(lo, 0xccccccccccccccccULL, hi, low_word_up);
}

// The 8-row file's low_byte_split, scale_words_256 and q6_scale_words on 512 bits: a
// sub-block's sum times its scale as one vpshufb and one multiply-add instead of vpmulld.
inline __m512i low_byte_split(__m512i d) {
  return _mm512_shuffle_epi8(d, pattern512(low_byte_split_pattern()));
}
inline __m512i scale_words_512(__m512i sc) {
  return _mm512_or_si512(sc, _mm512_slli_epi32(sc, 24));
}
inline __m512i q6_scale_words(__m512i pair, int u) {
  return scale_words_512(u == 0 ? _mm512_and_si512(pair, _mm512_set1_epi32(0xffff))
                                : _mm512_srli_epi32(pair, 16));
}

template <typename PackedBlock, bool kFive>
struct KindQ45 {
  using P = PackedBlock;
  static constexpr bool kMin = true;
  template <int NR>
  static void block_sums(const P& a, const P& b, const PackedActBlockK* const* xb, int64_t i,
                         __m512i* sumi, __m512i* summ) {
    const KScalesPair s(a.scales, b.scales);
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = summ[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j = 0; j < 8; ++j) {
      __m512i q[8];
      unpack_sub_block<P, kFive>(a, b, j, q);
      if constexpr (kFive) {
        constexpr int kParts = chains_per_row<NR, 8, kInFlight>();
        // As the 8-row kernel: the scale applied by one vpshufb and one vpdpwssd.
        const __m512i sw = scale_words_512(byte_to_dword(j < 4 ? s.sc_lo : s.sc_hi, j % 4));
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const __m512i d = dot_chunks<8, kParts>(q, xb[t][i].qs + 32 * j, 0);
          sumi[t] = _mm512_dpwssd_epi32(sumi[t], low_byte_split(d), sw);
          pin_v(sumi[t]);
        }
      } else {
        // A Q4_K sub-block's two 16-value halves each fit an int16 (|sum| <= 16 x 15 x 128 =
        // 30720), so one vpdpwssd applies the scale to both and adds them to the row's sum:
        // the same integers as vpmulld + vpaddd on their int32 total, one port-0 uop where
        // vpmulld takes two (a prefill is bound by port 0's vpdpbusd).
        constexpr int kHalfParts = chains_per_row<2 * NR, 4, kInFlight>();
        const __m512i sc2 =
            _mm512_shuffle_epi8(j < 4 ? s.sc_lo : s.sc_hi, pattern512(byte_to_words(j % 4, false)));
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const int8_t* y = xb[t][i].qs + 32 * j;
          const __m512i h0 = dot_chunks<4, kHalfParts>(q, y, 0);
          const __m512i h1 = dot_chunks<4, kHalfParts>(q, y, 4);
          sumi[t] = _mm512_dpwssd_epi32(sumi[t], words_pair(h0, h1), sc2);
          pin_v(sumi[t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int qq = 0; qq < 4; ++qq) {
      const __m512i m = min_pair_words(s, qq);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        summ[t] = dpwssd_bcast(summ[t], m, xb[t][i].bsums32 + 2 * qq);
      }
    }
  }
};

struct KindQ6 {
  using P = PackedQ6_Kx8;
  static constexpr bool kMin = false;
  template <int NR>
  static void block_sums(const P& a, const P& b, const PackedActBlockK* const* xb, int64_t i,
                         __m512i* sumi, __m512i*) {
    constexpr int kParts =
        chains_per_row<2 * NR, 4, kInFlight>();  // two sub-blocks per row and group
    __m512i off[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = off[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      __m512i q[8];
      unpack_q6_group(a, b, g, q);
      const __m512i pair = q6_scale_pairs(a, b, g);
      const __m512i sw0 = q6_scale_words(pair, 0), sw1 = q6_scale_words(pair, 1);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const int8_t* y = xb[t][i].qs + 32 * g;
        const __m512i d0 = dot_chunks<4, kParts>(q, y, 0);
        const __m512i d1 = dot_chunks<4, kParts>(q, y, 4);
        const __m512i both = _mm512_dpwssd_epi32(_mm512_madd_epi16(low_byte_split(d0), sw0),
                                                 low_byte_split(d1), sw1);
        sumi[t] = _mm512_add_epi32(sumi[t], both);
        pin_v(sumi[t]);
        off[t] = dpwssd_bcast(off[t], pair, xb[t][i].bsums + 2 * g);
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = _mm512_sub_epi32(sumi[t], _mm512_slli_epi32(off[t], 5));
  }
};

// The 16-row driver: w is two consecutive 8-row groups of n / 256 packed blocks each; out[t *
// os + r] for r < 16 is weight row r (group a's 8, then group b's) against activation row t.
// The float steps are PackedK's (packed_dot_k_x86.h) lane for lane.
template <typename K>
struct PackedK16 {
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    using P = typename K::P;
    const int64_t nb = n / kQK_K;
    const auto* wa = reinterpret_cast<const P*>(w);
    const P* wb = wa + nb;
    const PackedActBlockK* xb[NR];
    __m512 acc[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const PackedActBlockK*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      prefetch_pair(wa, wb, nb, i);
      __m512i sumi[NR], summ[NR];
      K::template block_sums<NR>(wa[i], wb[i], xb, i, sumi, summ);
      const __m512 dw = halfs_pair(wa[i].d, wb[i].d);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const __m512 yd = _mm512_set1_ps(xb[t][i].d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_mul_ps(dw, yd), acc[t]);
      }
      if constexpr (K::kMin) {
        const __m512 dm = halfs_pair(wa[i].dmin, wb[i].dmin);
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const __m512 yd = _mm512_set1_ps(xb[t][i].d);
          acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[t]), _mm512_mul_ps(dm, yd), acc[t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) _mm512_storeu_ps(out + t * os, acc[t]);
  }
};

template <typename K, int kMaxGroup>
void multi_packed_k16(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx,
                      float* out, int64_t os) {
  multi_packed_with<PackedK16<K>, kMaxGroup>(n, w, x, xs, nx, out, os);
}

}  // namespace

const PackedKKernelTable& packed_k16_kernels_avx512vnni() {
  // Up to 16 activation rows per group (the 8-row kernels and the 32-column formats stop at 9):
  // a pass over 10-16 rows then unpacks each weight block once instead of twice, though the
  // row sums no longer all fit the 32 vector registers. On the 2-core Intel Xeon VM (no AMX),
  // verify-cost on the Qwen2.5-Coder 1.5B, 4 alternations: passes over 10-16 tokens 7-16 %
  // cheaper (10 tokens 76 -> 66 ms), 1-9 and 17-18 unchanged; groups of up to 24 lost at
  // 17-19 rows. (The 32-column formats gained nothing from 16; docs/benchmarks.md.)
  constexpr int kMaxGroup = 16;
  static constexpr PackedKKernelTable kTable = {
      multi_packed_k16<KindQ45<PackedQ4_Kx8, false>, kMaxGroup>,
      multi_packed_k16<KindQ45<PackedQ5_Kx8, true>, kMaxGroup>,
      multi_packed_k16<KindQ6, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
