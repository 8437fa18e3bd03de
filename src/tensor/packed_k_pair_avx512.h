// What the kernels that read two adjacent 8-row K-quant groups at once share (the 16-row VNNI
// kernels, packed_dot_k16_avx512.cpp, and the AMX tile kernels, packed_dot_k_amx.cpp): the
// scales, mins and codes of both groups unpacked into 512-bit vectors, group a's 8 rows in the
// low lanes and group b's in the high ones, one 32-bit lane per weight row.
//
// Only for files compiled with AVX-512 F/BW/VL/VNNI: everything is in an unnamed namespace (as
// packed_pair_avx512.h).
#pragma once

#include <immintrin.h>

#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_k_x86.h"
#include "tensor/packed_pair_avx512.h"

namespace specdec {
namespace {

// As dpbusd_bcast (packed_pair_avx512.h), for the Q4_K/Q5_K min term's int16 pairs.
inline __m512i dpwssd_bcast(__m512i acc, __m512i a, const void* y) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*static_cast<const int*>(y)));
  return acc;
}
// A 256-bit pshufb pattern (the same in both 128-bit halves) repeated over 512 bits.
inline __m512i pattern512(__m256i p) { return join(p, p); }

// Byte a of each 32-bit lane, zero-extended to the lane.
inline __m512i byte_to_dword(__m512i v, int a) {
  return _mm512_shuffle_epi8(v, pattern512(byte_to_dword_pattern(a)));
}

// Both groups' Q4_K/Q5_K scales and mins (KScales of packed_dot_k_x86.h, a's lanes then b's).
struct KScalesPair {
  __m512i sc_lo, sc_hi, m_lo, m_hi;
  KScalesPair(const uint32_t (&a)[3][kPackRows], const uint32_t (&b)[3][kPackRows]) {
    const KScales sa(a), sb(b);
    sc_lo = join(sa.sc_lo, sb.sc_lo);
    sc_hi = join(sa.sc_hi, sb.sc_hi);
    m_lo = join(sa.m_lo, sb.m_lo);
    m_hi = join(sa.m_hi, sb.m_hi);
  }
};

inline __m512i min_pair_words(const KScalesPair& s, int q) {
  return _mm512_shuffle_epi8(q < 2 ? s.m_lo : s.m_hi, pattern512(byte_to_words(2 * (q % 2), true)));
}

template <typename P, bool kFive>
inline void unpack_sub_block(const P& a, const P& b, int j, __m512i q[8]) {
#pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) unpack_nibbles_pair(a.subs[j].qs[p], b.subs[j].qs[p], q[p], q[p + 4]);
  if constexpr (kFive) {
    const __m512i h = load_pair(a.subs[j].qh, b.subs[j].qh);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
#pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) {
      const __m512i moved = k < 4 ? _mm512_slli_epi16(h, 4 - k) : _mm512_srli_epi16(h, k - 4);
      q[k] = _mm512_or_si512(q[k], _mm512_and_si512(moved, bit4));
    }
  }
}

inline void unpack_q6_group(const PackedQ6_Kx8& a, const PackedQ6_Kx8& b, int g, __m512i q[8]) {
#pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) {
    unpack_nibbles_pair(a.groups[g].ql[p], b.groups[g].ql[p], q[p], q[p + 4]);
  }
  const __m512i top = _mm512_set1_epi8(0x30);
#pragma GCC unroll 16
  for (int u = 0; u < 2; ++u) {
    const __m512i h = load_pair(a.groups[g].qh[u], b.groups[g].qh[u]);
    // Bits 2k, 2k + 1 -> bits 4, 5.
    const __m512i moved[4] = {_mm512_slli_epi16(h, 4), _mm512_slli_epi16(h, 2), h,
                              _mm512_srli_epi16(h, 2)};
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      q[4 * u + k] = _mm512_or_si512(q[4 * u + k], _mm512_and_si512(moved[k], top));
    }
  }
}

inline __m512i q6_scale_pairs(const PackedQ6_Kx8& a, const PackedQ6_Kx8& b, int g) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.groups[g].scales));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.groups[g].scales));
  return _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

}  // namespace
}  // namespace specdec
