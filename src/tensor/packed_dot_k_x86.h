// The driver of the packed K-quant kernels (PackedQ4_Kx8, PackedQ5_Kx8, PackedQ6_Kx8) on the x86
// paths, and the unpacking both instruction sets share. Per 256-column super-block the kind K
// computes, for 8 weight rows x NR activation rows, the exact integer sums
//   sumi = sum over sub-blocks of sc * (q . y)   (Q6_K: of sc * ((q - 32) . y))
//   summ = sum over sub-blocks of m * (sum of y)  (Q4_K/Q5_K only)
// with the 6-bit scale unpacking and the scale multiplies done once per sub-block for all 8 rows
// (one madd, or a VNNI multiply, per sub-block and activation row, where the one-row kernels
// did it per weight row). This file turns the sums into floats in the order of
// packed_dot_k_scalar.cpp: acc += float(sumi) * (d * d_x), then acc -= float(summ) * (dmin *
// d_x), both fused, so all paths give identical bits and an output never depends on how many
// activation rows share a call. Each lane of an accumulator is one weight row, so there is no
// horizontal sum at the end.
//
// Only for the *_avx2.cpp / *_avx512.cpp files: everything is in an unnamed namespace.
#pragma once

#include <immintrin.h>

#include "tensor/cpu_features.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_x86.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

template <typename K>
struct PackedK {
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    using P = typename K::P;
    const auto* wb = reinterpret_cast<const P*>(w);
    const PackedActBlockK* xb[NR];
    __m256 acc[NR];
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const PackedActBlockK*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQK_K;
    const bool far = NR == 1 && decode_prefetch() == DecodePrefetch::kL2Far;
    for (int64_t i = 0; i < nb; ++i) {
      // 4 KiB ahead, not the legacy kernels' 2 KiB: on the 2-core EPYC VM a Qwen2.5-Coder 1.5B
      // decode step took 43-47 ms of caller CPU time instead of 57-59 (3 interleaved runs each;
      // 8 KiB: 44-51). With several activation rows the lines are asked into L2 only: the
      // integer work then bounds the pass, and with the lines asked into L1 the Q6_K kernel's
      // loads did not overlap it (its time was the stream's plus the arithmetic's). Measured
      // (bench_tensor MatmulChain, 65536 x 1536 Q6_K, two threads, 3-4 alternations, medians):
      // 5 rows 11.4 -> 8.3 ms, 7 rows 13.2 -> 9.9, 9 rows 17.3 -> 11.6; Q4_K's 2-3 rows even.
      // A verify pass of the Qwen2.5-Coder 1.5B over 5 tokens: 1.37 -> 1.19 decode steps.
      // Decode asks 8 KiB ahead into L2 instead where the CPU streams faster so
      // (decode_prefetch(), cpu_features.h: Intel server cores).
      if (far) {
        prefetch_ahead_l2<8192>(wb + i, sizeof(P));
      } else if constexpr (NR == 1) {
        prefetch_ahead<4096>(wb + i, sizeof(P));
      } else {
        prefetch_ahead_l2<4096>(wb + i, sizeof(P));
      }
      __m256i sumi[NR], summ[NR];
      K::template block_sums<NR>(wb[i], xb, i, sumi, summ);
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].d)));
#pragma GCC unroll 16
      for (int t = 0; t < NR; ++t) {
        const __m256 yd = _mm256_broadcast_ss(&xb[t][i].d);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_mul_ps(dw, yd), acc[t]);
      }
      if constexpr (K::kMin) {
        const __m256 dm =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].dmin)));
#pragma GCC unroll 16
        for (int t = 0; t < NR; ++t) {
          const __m256 yd = _mm256_broadcast_ss(&xb[t][i].d);
          acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[t]), _mm256_mul_ps(dm, yd), acc[t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NR; ++t) _mm256_storeu_ps(out + t * os, acc[t]);
  }
};

template <typename K, int kMaxGroup>
void multi_packed_k(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx,
                    float* out, int64_t os) {
  multi_packed_with<PackedK<K>, kMaxGroup>(n, w, x, xs, nx, out, os);
}

// ---- Q4_K / Q5_K scales and mins, 8 rows at once ----
//
// Lane r of the three scale words holds bytes 0..3, 4..7, 8..11 of row r's 12 scale bytes
// (A, B, C). BlockQ4_K's 6-bit packing is then byte-wise: sc[0..3] = A & 63, m[0..3] = B & 63,
// sc[4..7] = (C & 15) | ((A >> 6) << 4), m[4..7] = (C >> 4) | ((B >> 6) << 4); 32-bit shifts
// are fine because the masks drop what crosses a byte.
struct KScales {
  __m256i sc_lo, sc_hi, m_lo, m_hi;  // byte j of lane r: sc[j] / sc[j + 4] / m[j] / m[j + 4]

  explicit KScales(const uint32_t (&words)[3][kPackRows]) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words[0]));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words[1]));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words[2]));
    const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f);
    const __m256i top = _mm256_set1_epi8(0x30);
    sc_lo = _mm256_and_si256(a, m6);
    m_lo = _mm256_and_si256(b, m6);
    sc_hi =
        _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_srli_epi32(a, 2), top));
    m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi32(b, 2), top));
  }
};

// pshufb pattern that puts byte a of each 32-bit lane into the low byte of 16-bit lanes: (a, a)
// for the pair of 16-bit lanes of each 32-bit lane when `pair_next` is false (the same scale
// twice, for madd), (a, a + 1) when it is true (two consecutive mins).
inline __m256i byte_to_words(int a, bool pair_next) {
  const char z = static_cast<char>(0x80);
  const char b = static_cast<char>(pair_next ? a + 1 : a);
  const char a0 = static_cast<char>(a);
  return _mm256_setr_epi8(a0, z, b, z, static_cast<char>(a0 + 4), z, static_cast<char>(b + 4), z,
                          static_cast<char>(a0 + 8), z, static_cast<char>(b + 8), z,
                          static_cast<char>(a0 + 12), z, static_cast<char>(b + 12), z, a0, z, b, z,
                          static_cast<char>(a0 + 4), z, static_cast<char>(b + 4), z,
                          static_cast<char>(a0 + 8), z, static_cast<char>(b + 8), z,
                          static_cast<char>(a0 + 12), z, static_cast<char>(b + 12), z);
}

// Scale of sub-block j (0..7) of each row, in both 16-bit halves of the row's 32-bit lane.
inline __m256i scale_words(const KScales& s, int j) {
  return _mm256_shuffle_epi8(j < 4 ? s.sc_lo : s.sc_hi, byte_to_words(j % 4, false));
}
// Mins of sub-blocks 2q and 2q + 1 (q = 0..3) of each row as the 16-bit pair of its 32-bit lane.
inline __m256i min_pair_words(const KScales& s, int q) {
  return _mm256_shuffle_epi8(q < 2 ? s.m_lo : s.m_hi, byte_to_words(2 * (q % 2), true));
}

// The 8 chunks of sub-block j of a packed Q4_K/Q5_K block as bytes (chunk k: packed_blocks.h),
// Q5_K's fifth bit included: bit k of qh's bytes, moved to bit 4 with one 16-bit shift (the
// mask keeps only bits that stayed within their byte).
template <typename P, bool kFive>
inline void unpack_sub_block(const P& b, int j, __m256i q[8]) {
#pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) unpack_nibbles(b.subs[j].qs[p], q[p], q[p + 4]);
  if constexpr (kFive) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.subs[j].qh));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) {
      const __m256i moved = k < 4 ? _mm256_slli_epi16(h, 4 - k) : _mm256_srli_epi16(h, k - 4);
      q[k] = _mm256_or_si256(q[k], _mm256_and_si256(moved, bit4));
    }
  }
}

// The 8 chunks of group g (columns 32g .. 32g + 31) of a packed Q6_K block as 6-bit codes:
// chunks 0..3 are sub-block 2g, chunks 4..7 sub-block 2g + 1.
inline void unpack_q6_group(const PackedQ6_Kx8& b, int g, __m256i q[8]) {
#pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) unpack_nibbles(b.groups[g].ql[p], q[p], q[p + 4]);
  const __m256i top = _mm256_set1_epi8(0x30);
#pragma GCC unroll 16
  for (int u = 0; u < 2; ++u) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.groups[g].qh[u]));
    // Bits 2k, 2k + 1 -> bits 4, 5.
    const __m256i moved[4] = {_mm256_slli_epi16(h, 4), _mm256_slli_epi16(h, 2), h,
                              _mm256_srli_epi16(h, 2)};
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      q[4 * u + k] = _mm256_or_si256(q[4 * u + k], _mm256_and_si256(moved[k], top));
    }
  }
}

// Half h (0 or 1) of what the two functions above unpack, for AVX2's 16 registers: loads 2h and
// 2h + 1 only, that is chunks 2h, 2h + 1 (low nibbles) and 2h + 4, 2h + 5 (high nibbles) in
// q[0..3]. The chunks' column offsets within the 32 columns are
// half_chunk_offset(h, 0..3).
constexpr int half_chunk_offset(int h, int c) { return (c >= 2 ? 16 : 0) + 8 * h + 4 * (c % 2); }

template <typename P, bool kFive>
inline void unpack_sub_block_half(const P& b, int j, int h, __m256i q[4]) {
  unpack_nibbles(b.subs[j].qs[2 * h], q[0], q[2]);
  unpack_nibbles(b.subs[j].qs[2 * h + 1], q[1], q[3]);
  if constexpr (kFive) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.subs[j].qh));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int k = 2 * h + c % 2 + (c >= 2 ? 4 : 0);
      const __m256i moved = k < 4 ? _mm256_slli_epi16(bits, 4 - k) : _mm256_srli_epi16(bits, k - 4);
      q[c] = _mm256_or_si256(q[c], _mm256_and_si256(moved, bit4));
    }
  }
}

inline void unpack_q6_group_half(const PackedQ6_Kx8& b, int g, int h, __m256i q[4]) {
  unpack_nibbles(b.groups[g].ql[2 * h], q[0], q[2]);
  unpack_nibbles(b.groups[g].ql[2 * h + 1], q[1], q[3]);
  const __m256i top = _mm256_set1_epi8(0x30);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i bits =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.groups[g].qh[c / 2]));
    const int k = 2 * h + c % 2;  // bits 2k, 2k + 1 -> bits 4, 5
    const __m256i moved = k == 0   ? _mm256_slli_epi16(bits, 4)
                          : k == 1 ? _mm256_slli_epi16(bits, 2)
                          : k == 2 ? bits
                                   : _mm256_srli_epi16(bits, 2);
    q[c] = _mm256_or_si256(q[c], _mm256_and_si256(moved, top));
  }
}

// ---- Shared by the VNNI kernels (8-row packed_dot_k_avx512.cpp, 16-row
// packed_dot_k16_avx512.cpp) ----

// Column offset within a sub-block's 32 columns of chunk k (0..7) of an unpacked sub-block:
// low-nibble chunks 0..3 are columns 0..15, high-nibble chunks 4..7 columns 16..31.
constexpr int chunk_offset(int k) { return k < 4 ? 4 * k : 16 + 4 * (k - 4); }

// Independent vpdpbusd chains per row so that a pass over `rows` rows keeps about kInFlight in
// flight (the instruction's latency over its issue interval), at most `chunks` (one chunk per
// chain).
template <int rows, int chunks, int kInFlight>
constexpr int chains_per_row() {
  const int c = (kInFlight + rows - 1) / rows;
  return c < chunks ? c : chunks;
}

// pshufb pattern (the same in both 128-bit halves) that puts byte a of each 32-bit lane,
// zero-extended, into the lane.
inline __m256i byte_to_dword_pattern(int a) {
  const char z = static_cast<char>(0x80);
  const char a0 = static_cast<char>(a);
  return _mm256_setr_epi8(a0, z, z, z, static_cast<char>(a0 + 4), z, z, z,
                          static_cast<char>(a0 + 8), z, z, z, static_cast<char>(a0 + 12), z, z, z,
                          a0, z, z, z, static_cast<char>(a0 + 4), z, z, z,
                          static_cast<char>(a0 + 8), z, z, z, static_cast<char>(a0 + 12), z, z, z);
}

// pshufb pattern (the same in both 128-bit halves) that turns each 32-bit lane d, |d| < 2^17,
// into the int16 pair (d & 255, d >> 8): byte 0 zero-extended, then bytes 1 and 2, which hold
// d >> 8 exactly as it fits an int16 (the VNNI kernels' low_byte_split).
inline __m256i low_byte_split_pattern() {
  const char z = static_cast<char>(0x80);
  return _mm256_setr_epi8(0, z, 1, 2, 4, z, 5, 6, 8, z, 9, 10, 12, z, 13, 14, 0, z, 1, 2, 4, z, 5,
                          6, 8, z, 9, 10, 12, z, 13, 14);
}

// Q6_K scales of sub-blocks 2g and 2g + 1 of each row as the int16 pair of its 32-bit lane.
inline __m256i q6_scale_pairs(const PackedQ6_Kx8& b, int g) {
  return _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.groups[g].scales)));
}

}  // namespace
}  // namespace specdec
