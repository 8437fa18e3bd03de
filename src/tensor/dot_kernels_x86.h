// The integer-weight dot kernels of the x86 paths (legacy 32-element formats and K-quants),
// written once and instantiated by each instruction-set file with its integer dot step (Ops):
// vec_dot_avx2.cpp with maddubs + madd, vec_dot_avx512.cpp with the VNNI instructions. Both
// compute the same exact integer block sums, and every float operation is the same explicit
// intrinsic in the same order, so the two paths give identical bits.
//
// Multi-row structure: each kernel takes NR activation rows, unpacks a weight block once and
// updates NR independent accumulators. Every output sees exactly the operations it would see
// with NR = 1 (same intrinsics, same order), so results do not depend on how the activation rows
// are grouped. All float arithmetic is explicit intrinsics, so the compiler cannot contract or
// reorder it differently per instantiation.
//
// Ops provides, on 32 bytes a (unsigned) and b (signed):
//   dot_u8s8(a, b)              8 int32 lanes, lane j = sum of the products of bytes 4j..4j+3;
//   add_scaled_dot(acc, s, a, b)  acc + s * (pairwise sums of products), s as 16 int16 lanes.
// Every caller keeps a pair of products within int16 (see the bounds at each use), which is
// what makes the AVX2 form (saturating maddubs) exact.
//
// Only for the *_avx2.cpp / *_avx512.cpp files: everything is in an unnamed namespace, so each
// translation unit gets its own copy compiled with its own instruction sets, and none can leak
// into another path through the linker.
#pragma once

#include <immintrin.h>

#include "tensor/quant_blocks.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Runs K::run<NR> over nx activation rows in groups of at most kMaxNR.
template <typename K>
void multi(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx, float* out,
           int64_t os) {
  int64_t t = 0;
  for (; t + K::kMaxNR <= nx; t += K::kMaxNR) {
    K::template run<K::kMaxNR>(n, w, x + static_cast<size_t>(t) * xs, xs, out + t * os, os);
  }
  const int64_t rest = nx - t;
  const uint8_t* xt = x + static_cast<size_t>(t) * xs;
  float* ot = out + t * os;
  if constexpr (K::kMaxNR > 4) {
    if (rest == 4) K::template run<4>(n, w, xt, xs, ot, os);
  }
  if (rest == 3) K::template run<3>(n, w, xt, xs, ot, os);
  if (rest == 2) K::template run<2>(n, w, xt, xs, ot, os);
  if (rest == 1) K::template run<1>(n, w, xt, xs, ot, os);
}

// ---- legacy 32-element formats ----

// The 4 high-bit bytes of a Q5 block -> 32 bytes, byte j = 0x10 if bit j is set.
inline __m256i bits_to_0x10(const uint8_t* qh4) {
  uint32_t bits;
  __builtin_memcpy(&bits, qh4, 4);
  return bits_to_0x10(bits);
}

// 16 bytes of nibbles -> 32 bytes: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

struct UnpackQ4_0 {
  using W = BlockQ4_0;
  using X = BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i q(const W& b) { return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8)); }
};
struct UnpackQ4_1 {
  using W = BlockQ4_1;
  using X = BlockQ8_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i q(const W& b) { return nibbles(b.qs); }
};
struct UnpackQ5_0 {
  using W = BlockQ5_0;
  using X = BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i q(const W& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), bits_to_0x10(b.qh)),
                           _mm256_set1_epi8(16));
  }
};
struct UnpackQ5_1 {
  using W = BlockQ5_1;
  using X = BlockQ8_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i q(const W& b) { return _mm256_or_si256(nibbles(b.qs), bits_to_0x10(b.qh)); }
};
struct UnpackQ8_0 {
  using W = BlockQ8_0;
  using X = BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i q(const W& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};

template <typename U, typename Ops>
struct Legacy {
  static constexpr int kMaxNR = 4;
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    const auto* wb = reinterpret_cast<const typename U::W*>(w);
    const typename U::X* xb[NR];
    __m256 acc[NR];
    __m128 accm[NR];
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const typename U::X*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
      accm[t] = _mm_setzero_ps();
    }
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i q = U::q(wb[i]);
      // Signed x signed via the sign trick: |q| * (y * sign(q)).
      const __m256i aq = U::kSigned ? _mm256_sign_epi8(q, q) : q;
      const __m128 wdm = h2f_pair(&wb[i]);  // [d_w, m_w]
      for (int t = 0; t < NR; ++t) {
        __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t][i].qs));
        if constexpr (U::kSigned) y = _mm256_sign_epi8(y, q);
        // Lane 0: d_w * d_x, the block's scale; lane 1: m_w * s_x (min term, _1 formats).
        const __m128 xds = h2f_pair(&xb[t][i]);
        const __m256 d = _mm256_broadcastss_ps(_mm_mul_ps(wdm, xds));
        acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(Ops::dot_u8s8(aq, y)), acc[t]);
        // The min term accumulates (fused) in lane 1; lane 0 collects unused d_w * d_x.
        if constexpr (U::kMin) accm[t] = _mm_fmadd_ps(wdm, xds, accm[t]);
      }
    }
    for (int t = 0; t < NR; ++t) out[t * os] = finish(acc[t], accm[t]);
  }

  static float finish(__m256 acc, __m128 accm) {
    __m128 s = hsum8(acc);
    if constexpr (U::kMin) s = _mm_add_ss(s, _mm_movehdup_ps(accm));
    return _mm_cvtss_f32(s);
  }

  // NW weight rows against one activation row: per output exactly the operations of run<1>
  // (so matvec and batched results agree bitwise); the activation block is loaded and its
  // header converted once for all NW rows.
  template <int NW>
  static void run_rows(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, float* out,
                       int64_t os) {
    const typename U::W* wb[NW];
    __m256 acc[NW];
    __m128 accm[NW];
    for (int r = 0; r < NW; ++r) {
      wb[r] = reinterpret_cast<const typename U::W*>(w + static_cast<size_t>(r) * ws);
      acc[r] = _mm256_setzero_ps();
      accm[r] = _mm_setzero_ps();
    }
    const auto* xb = reinterpret_cast<const typename U::X*>(x);
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i].qs));
      const __m128 xds = h2f_pair(&xb[i]);
      for (int r = 0; r < NW; ++r) {
        const __m256i q = U::q(wb[r][i]);
        const __m256i aq = U::kSigned ? _mm256_sign_epi8(q, q) : q;
        const __m256i yr = U::kSigned ? _mm256_sign_epi8(y, q) : y;
        const __m128 wdm = h2f_pair(&wb[r][i]);
        const __m256 d = _mm256_broadcastss_ps(_mm_mul_ps(wdm, xds));
        acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(Ops::dot_u8s8(aq, yr)), acc[r]);
        if constexpr (U::kMin) accm[r] = _mm_fmadd_ps(wdm, xds, accm[r]);
      }
    }
    for (int r = 0; r < NW; ++r) out[r * os] = finish(acc[r], accm[r]);
  }
};

// Runs K::run_rows<NW> over nw weight rows in groups of kRowsNW.
template <typename K>
void multi_rows(int64_t n, const uint8_t* w, size_t ws, int64_t nw, const uint8_t* x, float* out,
                int64_t os) {
  constexpr int kRowsNW = 2;
  int64_t r = 0;
  for (; r + kRowsNW <= nw; r += kRowsNW) {
    K::template run_rows<kRowsNW>(n, w + static_cast<size_t>(r) * ws, ws, x, out + r * os, os);
  }
  if (r < nw) K::template run_rows<1>(n, w + static_cast<size_t>(r) * ws, ws, x, out + r * os, os);
}

// ---- K-quants (256-element super-blocks against Q8_K) ----

// 6-bit scales and mins of a Q4_K/Q5_K super-block (integer work, exact).
inline void k_scales(const uint8_t* s, int16_t sc[8], int16_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = static_cast<int16_t>(s[j] & 63);
    m[j] = static_cast<int16_t>(s[j + 4] & 63);
    sc[j + 4] = static_cast<int16_t>((s[j + 8] & 0x0f) | ((s[j] >> 6) << 4));
    m[j + 4] = static_cast<int16_t>((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
}

// Sum over sub-blocks of m[j] * (bsums[2j] + bsums[2j+1]) as 4 int32 lanes.
inline __m128i mins_dot(const int16_t m[8], const int16_t* bsums) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums + 8));
  const __m128i pair = _mm_hadd_epi16(lo, hi);  // sub-block sums j = 0..7 (|.| <= 4064)
  return _mm_madd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m)), pair);
}

template <bool kFiveBit, typename Ops>
struct KQuant45 {
  // 5 rows: a verify pass at gamma = 4 is one call, so each block is unpacked once. What does not
  // fit in registers is spilled per 256-weight block, not per chunk.
  static constexpr int kMaxNR = 5;
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    const BlockQ8_K* xb[NR];
    __m256 acc[NR];
    __m128 accm[NR];
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const BlockQ8_K*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
      accm[t] = _mm_setzero_ps();
    }
    const size_t wsize = kFiveBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const uint8_t* blk = w + static_cast<size_t>(i) * wsize;
      prefetch_ahead(blk, wsize);
      // Q4_K and Q5_K share d, dmin, scales at the same offsets.
      const auto* b4 = reinterpret_cast<const BlockQ4_K*>(blk);
      const uint8_t* qs = kFiveBit ? reinterpret_cast<const BlockQ5_K*>(blk)->qs : b4->qs;
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFiveBit) {
        hbits = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ5_K*>(blk)->qh));
      }
      alignas(16) int16_t sc[8], m[8];
      k_scales(b4->scales, sc, m);
      // Two partial sums per row (the low- and high-nibble sub-blocks), added once per
      // super-block: VNNI's accumulating instructions have a latency of several cycles, and one
      // chain of 8 per row would bound a one-row pass.
      __m256i sumi[NR], sumi_hi[NR];
      for (int t = 0; t < NR; ++t) sumi[t] = sumi_hi[t] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        __m256i ql, qhi;
        unpack_nibbles(qs + 32 * c, ql, qhi);
        if constexpr (kFiveBit) {
          const __m256i one = _mm256_set1_epi8(1);
          const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
          ql = _mm256_or_si256(
              ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, s0), one), 4));
          qhi = _mm256_or_si256(
              qhi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, s1), one), 4));
        }
        const __m256i sc0 = _mm256_set1_epi16(sc[2 * c]);
        const __m256i sc1 = _mm256_set1_epi16(sc[2 * c + 1]);
        for (int t = 0; t < NR; ++t) {
          const auto* y = reinterpret_cast<const __m256i*>(xb[t][i].qs + 64 * c);
          sumi[t] = Ops::add_scaled_dot(sumi[t], sc0, ql, _mm256_loadu_si256(y));
          sumi_hi[t] = Ops::add_scaled_dot(sumi_hi[t], sc1, qhi, _mm256_loadu_si256(y + 1));
        }
      }
      const float d = h2f(b4->d), dmin = h2f(b4->dmin);
      for (int t = 0; t < NR; ++t) {
        const float yd = xb[t][i].d;
        const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_set1_ps(yd));
        const __m256i si = _mm256_add_epi32(sumi[t], sumi_hi[t]);
        acc[t] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(si), acc[t]);
        const __m128 dm = _mm_mul_ps(_mm_set1_ps(-dmin), _mm_set1_ps(yd));
        accm[t] = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(mins_dot(m, xb[t][i].bsums)), accm[t]);
      }
    }
    for (int t = 0; t < NR; ++t) {
      __m128 mm = _mm_add_ps(accm[t], _mm_movehl_ps(accm[t], accm[t]));
      mm = _mm_add_ss(mm, _mm_movehdup_ps(mm));
      out[t * os] = _mm_cvtss_f32(_mm_add_ss(hsum8(acc[t]), mm));
    }
  }
};

template <typename Ops>
struct KQuant6 {
  static constexpr int kMaxNR = 5;  // as KQuant45
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    const auto* wb = reinterpret_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* xb[NR];
    __m256 acc[NR];
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const BlockQ8_K*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
    }
    const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const BlockQ6_K& b = wb[i];
      prefetch_ahead(&b, sizeof(BlockQ6_K));
      // Scales as int16 for the 32 bsums correction: sumi -= 32 * sum_j sc[j] * bsums[j].
      const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
      // Two partial sums per row (even and odd groups g), as in KQuant45.
      __m256i sumi[NR], sumi_odd[NR];
      for (int t = 0; t < NR; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t][i].bsums));
        sumi[t] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
        sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), sumi[t]);
        sumi_odd[t] = _mm256_setzero_si256();
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4),
                               _mm256_slli_epi16(_mm256_and_si256(hb, two), 4));
        q[1] =
            _mm256_or_si256(_mm256_and_si256(l1, low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two), 4));
        q[2] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two), 4));
        q[3] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two), 4));
        for (int g = 0; g < 4; ++g) {
          // Elements 128h + 32g + [0,16) use scale 8h + 2g, [16,32) use 8h + 2g + 1.
          const __m256i s = _mm256_set_m128i(_mm_set1_epi16(b.scales[8 * h + 2 * g + 1]),
                                             _mm_set1_epi16(b.scales[8 * h + 2 * g]));
          for (int t = 0; t < NR; ++t) {
            const __m256i y = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(xb[t][i].qs + 128 * h + 32 * g));
            if (g % 2 == 0) {
              sumi[t] = Ops::add_scaled_dot(sumi[t], s, q[g], y);
            } else {
              sumi_odd[t] = Ops::add_scaled_dot(sumi_odd[t], s, q[g], y);
            }
          }
        }
      }
      const float d = h2f(b.d);
      for (int t = 0; t < NR; ++t) {
        const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_set1_ps(xb[t][i].d));
        acc[t] =
            _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[t], sumi_odd[t])), acc[t]);
      }
    }
    for (int t = 0; t < NR; ++t) out[t * os] = _mm_cvtss_f32(hsum8(acc[t]));
  }
};

}  // namespace
}  // namespace specdec
