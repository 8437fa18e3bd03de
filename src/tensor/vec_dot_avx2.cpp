// AVX2/FMA/F16C dot kernels. Compiled with -mavx2 -mfma -mf16c; only reached through
// dot_kernels_avx2() after cpu_has_avx2(). Raw loops and intrinsics only (no STL), so no
// AVX2-compiled inline function can leak into baseline code through the linker. The integer
// formats' kernels are in dot_kernels_x86.h (shared with the AVX-512 VNNI path); this file gives
// them AVX2's integer dot step and holds the float formats' kernels.
#include <immintrin.h>

#include "tensor/dot_kernels_x86.h"
#include "tensor/kernel_types.h"
#include "tensor/quant_blocks.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

// AVX2 has no 8-bit dot instruction: maddubs (pairs of products, saturating to int16, exact
// within the callers' bounds) and madd (int16 pairs to int32).
struct MaddubsOps {
  static __m256i dot_u8s8(__m256i a, __m256i b) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
  }
  static __m256i add_scaled_dot(__m256i acc, __m256i s, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_maddubs_epi16(a, b)));
  }
};

// ---- float formats: 4 accumulators of 8 lanes per activation row ----

struct LoadF32 {
  static constexpr size_t kElem = 4;
  static __m256 load(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};
struct LoadF16 {
  static constexpr size_t kElem = 2;
  static __m256 load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct LoadBF16 {
  static constexpr size_t kElem = 2;
  static __m256 load(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

template <typename L>
struct FloatDot {
  static constexpr int kMaxNR = 2;
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    constexpr size_t E = L::kElem;
    __m256 acc[NR][4];
    for (int t = 0; t < NR; ++t) {
      for (int a = 0; a < 4; ++a) acc[t][a] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256 wv[4];
      for (int a = 0; a < 4; ++a) wv[a] = L::load(w + (i + 8 * a) * E);
      for (int t = 0; t < NR; ++t) {
        const uint8_t* xt = x + static_cast<size_t>(t) * xs;
        for (int a = 0; a < 4; ++a) {
          acc[t][a] = _mm256_fmadd_ps(wv[a], L::load(xt + (i + 8 * a) * E), acc[t][a]);
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = L::load(w + i * E);
      for (int t = 0; t < NR; ++t) {
        acc[t][0] =
            _mm256_fmadd_ps(wv, L::load(x + static_cast<size_t>(t) * xs + i * E), acc[t][0]);
      }
    }
    if (i < n) {  // tail: zero-padded copies, so the same vector ops apply
      alignas(32) uint8_t wt[32] = {}, xt[32] = {};
      const size_t bytes = static_cast<size_t>(n - i) * E;
      __builtin_memcpy(wt, w + i * E, bytes);
      const __m256 wv = L::load(wt);
      for (int t = 0; t < NR; ++t) {
        __builtin_memcpy(xt, x + static_cast<size_t>(t) * xs + i * E, bytes);
        acc[t][0] = _mm256_fmadd_ps(wv, L::load(xt), acc[t][0]);
      }
    }
    for (int t = 0; t < NR; ++t) {
      const __m256 s =
          _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3]));
      out[t * os] = _mm_cvtss_f32(hsum8(s));
    }
  }
};

}  // namespace

const DotRowsKernelTable& dot_rows_kernels_avx2() {
  static constexpr DotRowsKernelTable kTable = {
      multi_rows<Legacy<UnpackQ4_0, MaddubsOps>>, multi_rows<Legacy<UnpackQ4_1, MaddubsOps>>,
      multi_rows<Legacy<UnpackQ5_0, MaddubsOps>>, multi_rows<Legacy<UnpackQ5_1, MaddubsOps>>,
      multi_rows<Legacy<UnpackQ8_0, MaddubsOps>>,
  };
  return kTable;
}

const DotKernelTable& dot_kernels_avx2() {
  static constexpr DotKernelTable kTable = {
      multi<FloatDot<LoadF32>>,
      multi<FloatDot<LoadF16>>,
      multi<FloatDot<LoadBF16>>,
      multi<Legacy<UnpackQ4_0, MaddubsOps>>,
      multi<Legacy<UnpackQ4_1, MaddubsOps>>,
      multi<Legacy<UnpackQ5_0, MaddubsOps>>,
      multi<Legacy<UnpackQ5_1, MaddubsOps>>,
      multi<Legacy<UnpackQ8_0, MaddubsOps>>,
      multi<KQuant45<false, MaddubsOps>>,
      multi<KQuant45<true, MaddubsOps>>,
      multi<KQuant6<MaddubsOps>>,
  };
  return kTable;
}

}  // namespace specdec
