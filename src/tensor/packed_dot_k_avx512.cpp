// AVX-512 VNNI integer sums for the packed K-quants (packed_blocks.h; driver and unpacking in
// packed_dot_k_x86.h). vpdpbusd adds a chunk's 4 products per row straight into int32 lanes,
// so a sub-block needs no int16 chains; its sum meets the row's sub-block scale in one int16
// multiply-add (vpdpwssd), and the min and Q6_K offset terms take one vpdpwssd per pair of
// sub-blocks. The integer sums are the AVX2 path's exactly, so the outputs are the same bits.
// Compiled with AVX2/FMA/F16C plus AVX-512 F/BW/VL/VNNI; only reached after
// cpu_has_avx512_vnni().
#include <immintrin.h>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_k_x86.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// acc + (4-byte groups of q) . (the 4 bytes at y, in every lane), with the activation bytes as
// the instruction's embedded broadcast operand ({1to8}). GCC 12 does not fold a broadcast load
// into vpdpbusd / vpdpwssd itself; a separate vpbroadcastd per product doubles the instructions
// of the inner loop (measured: about 1.3x the time per pass at 9 activation rows).
inline __m256i dpbusd_bcast(__m256i acc, __m256i q, const void* y) {
  asm("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(q), "m"(*static_cast<const int*>(y)));
  return acc;
}
inline __m256i dpwssd_bcast(__m256i acc, __m256i a, const void* y) {
  asm("vpdpwssd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*static_cast<const int*>(y)));
  return acc;
}

// Keeps GCC from reassociating a row's running sum across sub-blocks: without it, it computes
// all 64 sub-block dot products of a super-block first, spills them, and multiplies afterwards.
inline void pin_v(__m256i& v) { asm("" : "+v"(v)); }

// Sum over chunks [k0, k0 + N) of q[k] . y (4 products per lane), split into kParts chains
// (vpdpbusd's latency is several cycles; with few activation rows one chain per row would bound
// the loop), added exactly at the end.
template <int N, int kParts>
inline __m256i dot_chunks(const __m256i* q, const int8_t* y, int k0) {
  __m256i part[kParts];
#pragma GCC unroll 16
  for (int p = 0; p < kParts; ++p) part[p] = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int k = k0; k < k0 + N; ++k) {
    part[(k - k0) % kParts] = dpbusd_bcast(part[(k - k0) % kParts], q[k], y + chunk_offset(k));
  }
  __m256i s = part[0];
#pragma GCC unroll 16
  for (int p = 1; p < kParts; ++p) s = _mm256_add_epi32(s, part[p]);
  return s;
}

// About 8 vpdpbusd in flight (latency 4 x 2 per cycle on Zen 4).
constexpr int kInFlight = 8;

// Byte a of each 32-bit lane, zero-extended to the lane.
inline __m256i byte_to_dword(__m256i v, int a) {
  return _mm256_shuffle_epi8(v, byte_to_dword_pattern(a));
}

// Each 32-bit lane of lo and hi holds a value that fits an int16: the lane's int16 pair (lo's,
// hi's), for vpdpwssd. One merge-masked vpshufb: hi's low word moves into the high word over
// lo's sign bits (the 16-row kernel's words_pair on 256 bits).
inline __m256i words_pair(__m256i lo, __m256i hi) {
  const __m256i low_word_up = _mm256_set_epi32(0x0d0c0000, 0x09080000, 0x05040000, 0x01000000,
                                               0x0d0c0000, 0x09080000, 0x05040000, 0x01000000);
  return _mm256_mask_shuffle_epi8(lo, 0xccccccccU, hi, low_word_up);
}

// A sub-block's int32 sum d with |d| < 2^17 (Q6_K: 16 codes of 0..63 against int8
// activations, at most 16 x 63 x 128; Q5_K: 32 codes of 0..31, at most 32 x 31 x 128) as the
// int16 pair (d & 255, d >> 8) in each lane, one vpshufb. Against the scale words (sc, 256 sc),
// one vpmaddwd / vpdpwssd gives d * sc exactly: the same integer as vpmulld, which is two uops
// on Intel against this pair's one shuffle (port 5) and one multiply-add.
inline __m256i low_byte_split(__m256i d) {
  return _mm256_shuffle_epi8(d, low_byte_split_pattern());
}

// Each lane's int16 pair (sc, 256 sc) from a scale sc in [-128, 127] in the lane's low word (the
// high word zero): 256 sc fits an int16.
inline __m256i scale_words_256(__m256i sc) {
  return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 24));
}

// The pair for Q6_K sub-block 2g + u, from q6_scale_pairs' pair of sign-extended int8 scales.
inline __m256i q6_scale_words(__m256i pair, int u) {
  return scale_words_256(u == 0 ? _mm256_and_si256(pair, _mm256_set1_epi32(0xffff))
                                : _mm256_srli_epi32(pair, 16));
}

template <typename PackedBlock, bool kFive>
struct KindQ45 {
  using P = PackedBlock;
  static constexpr bool kMin = true;
  template <int NR>
  static void block_sums(const P& b, const PackedActBlockK* const* xb, int64_t i, __m256i* sumi,
                         __m256i* summ) {
    const KScales s(b.scales);
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = summ[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int j = 0; j < 8; ++j) {
      __m256i q[8];
      unpack_sub_block<P, kFive>(b, j, q);
      if constexpr (kFive) {
        constexpr int kParts = chains_per_row<NR, 8, kInFlight>();
        // A Q5_K sub-block's sum (|d| <= 32 x 31 x 128 < 2^17) times its 6-bit scale as the
        // Q6_K kernel below applies its scales: one vpshufb and one vpdpwssd, not vpmulld.
        const __m256i sw = scale_words_256(byte_to_dword(j < 4 ? s.sc_lo : s.sc_hi, j % 4));
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const __m256i d = dot_chunks<8, kParts>(q, xb[t][i].qs + 32 * j, 0);
          sumi[t] = _mm256_dpwssd_epi32(sumi[t], low_byte_split(d), sw);
          pin_v(sumi[t]);
        }
      } else {
        // As in the 16-row kernel: a Q4_K sub-block's two 16-value halves each fit an int16
        // (|sum| <= 16 x 15 x 128 = 30720), so one vpdpwssd scales both and adds them, the
        // same integers as vpmulld + vpaddd on their total (vpmulld is two uops on Intel).
        constexpr int kHalfParts = chains_per_row<2 * NR, 4, kInFlight>();
        const __m256i sc2 = scale_words(s, j);
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const int8_t* y = xb[t][i].qs + 32 * j;
          const __m256i h0 = dot_chunks<4, kHalfParts>(q, y, 0);
          const __m256i h1 = dot_chunks<4, kHalfParts>(q, y, 4);
          sumi[t] = _mm256_dpwssd_epi32(sumi[t], words_pair(h0, h1), sc2);
          pin_v(sumi[t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int qq = 0; qq < 4; ++qq) {
      const __m256i m = min_pair_words(s, qq);
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
  static void block_sums(const P& b, const PackedActBlockK* const* xb, int64_t i, __m256i* sumi,
                         __m256i*) {
    constexpr int kParts =
        chains_per_row<2 * NR, 4, kInFlight>();  // two sub-blocks per row and group
    __m256i off[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = off[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      __m256i q[8];
      unpack_q6_group(b, g, q);
      const __m256i pair = q6_scale_pairs(b, g);
      const __m256i sw0 = q6_scale_words(pair, 0), sw1 = q6_scale_words(pair, 1);
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const int8_t* y = xb[t][i].qs + 32 * g;
        const __m256i d0 = dot_chunks<4, kParts>(q, y, 0);
        const __m256i d1 = dot_chunks<4, kParts>(q, y, 4);
        const __m256i both = _mm256_dpwssd_epi32(_mm256_madd_epi16(low_byte_split(d0), sw0),
                                                 low_byte_split(d1), sw1);
        sumi[t] = _mm256_add_epi32(sumi[t], both);
        pin_v(sumi[t]);
        off[t] = dpwssd_bcast(off[t], pair, xb[t][i].bsums + 2 * g);
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) sumi[t] = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(off[t], 5));
  }
};

}  // namespace

const PackedKKernelTable& packed_k_kernels_avx512vnni() {
  constexpr int kMaxGroup = 9;
  static constexpr PackedKKernelTable kTable = {
      multi_packed_k<KindQ45<PackedQ4_Kx8, false>, kMaxGroup>,
      multi_packed_k<KindQ45<PackedQ5_Kx8, true>, kMaxGroup>,
      multi_packed_k<KindQ6, kMaxGroup>,
  };
  return kTable;
}

}  // namespace specdec
