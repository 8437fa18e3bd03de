// The driver of the packed kernels (packed_blocks.h) on the x86 paths: per packed block, the
// instruction set's kind K computes the exact integer block sums of the 8 weight rows against
// NR activation rows; this file turns them into floats (scale multiply, accumulate) for the 8
// rows at once, with every float operation an explicit intrinsic in the order of
// packed_dot_scalar.cpp, so all paths give identical bits and an output never depends on how
// many activation rows share a call (the NR rows of a call keep separate accumulators).
//
// Only for the *_avx2.cpp / *_avx512.cpp files: everything is in an unnamed namespace, so each
// translation unit gets its own copy compiled with its own instruction sets.
#pragma once

#include <immintrin.h>

#include "tensor/packed_blocks.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

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
    // into it one after the other, which leaves room for 5 rows in AVX2's 16 registers.
    __m256 acc[NR];
    for (int t = 0; t < NR; ++t) {
      xb[t] = reinterpret_cast<const X*>(x + static_cast<size_t>(t) * xs);
      acc[t] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      prefetch_ahead(wb + i, sizeof(P));
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

// Runs Driver::run<NR> for NR = kMax, kMax - 1, ..., 1 until one matches nr.
template <typename Driver, int kMax>
void run_packed(int64_t nr, int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                int64_t os) {
  if (nr == kMax) {
    Driver::template run<kMax>(n, w, x, xs, out, os);
  } else if constexpr (kMax > 1) {
    run_packed<Driver, kMax - 1>(nr, n, w, x, xs, out, os);
  }
}

// Activation rows in groups of at most kMaxGroup (the register budget: 5 with AVX2's 16 vector
// registers), split evenly (6 = 3 + 3, not 5 + 1) so the weight unpacking is shared as widely
// as possible; a verify pass at gamma = kMaxGroup - 1 is one group. Driver is Packed<K> (the
// legacy kinds) or PackedK<K> (the K-quants, packed_dot_k_x86.h).
template <typename Driver, int kMaxGroup>
void multi_packed_with(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx,
                       float* out, int64_t os) {
  int64_t t = 0;
  while (t < nx) {
    const int64_t left = nx - t, groups = (left + kMaxGroup - 1) / kMaxGroup;
    const int64_t nr = (left + groups - 1) / groups;
    run_packed<Driver, kMaxGroup>(nr, n, w, x + static_cast<size_t>(t) * xs, xs, out + t * os, os);
    t += nr;
  }
}

template <typename K, int kMaxGroup>
void multi_packed(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx, float* out,
                  int64_t os) {
  multi_packed_with<Packed<K>, kMaxGroup>(n, w, x, xs, nx, out, os);
}

}  // namespace
}  // namespace specdec
