// AVX-512 dot kernels: VNNI for the integer weight formats, 512-bit FMAs for the float ones.
// Compiled with AVX2/FMA/F16C plus AVX-512 F/BW/VL/VNNI; only reached through
// dot_kernels_avx512vnni() after cpu_has_avx512_vnni(). The integer kernels are
// dot_kernels_x86.h's, on 256-bit vectors, with VNNI as the integer dot step: one vpdpbusd for
// the 8-bit products (AVX2 needs maddubs + madd) and one vpdpwssd for the K-quants' scaled sums
// (AVX2: madd + add). The integer sums are the same, the float operations are the same, so the
// results are the same bits as the AVX2 path. The float formats (F32/F16/BF16) have kernels of
// their own on 512-bit vectors: twice the lanes of the AVX2 ones, masked loads for the tail,
// and a different (fixed) summation order, so they agree with AVX2 to rounding, not bit for
// bit, like the scalar path does.
//
// GCC 12's avx512fintrin.h builds its "undefined" pass-through vectors by self-initialization
// (GCC bug 105593, fixed in 13), which -Wuninitialized reports at every use of the 512-bit
// conversions below; nothing here reads an uninitialized value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "tensor/dot_kernels_x86.h"
#include "tensor/kernel_types.h"
#include "tensor/simd_avx2.h"

namespace specdec {
namespace {

struct VnniOps {
  static __m256i dot_u8s8(__m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b);
  }
  static __m256i add_scaled_dot(__m256i acc, __m256i s, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, s, _mm256_maddubs_epi16(a, b));
  }
};

// ---- float formats: 4 accumulators of 16 lanes per activation row ----

struct Load512F32 {
  static constexpr size_t kElem = 4;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 load_masked(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct Load512F16 {
  static constexpr size_t kElem = 2;
  static __m512 load(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_masked(const uint8_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));  // masked-off halves are +0
  }
};
struct Load512BF16 {
  static constexpr size_t kElem = 2;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint8_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_masked(const uint8_t* p, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

template <typename L>
struct FloatDot512 {
  static constexpr int kMaxNR = 4;  // 16 accumulators, 4 weight vectors: within 32 registers
  template <int NR>
  static void run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, float* out,
                  int64_t os) {
    constexpr size_t E = L::kElem;
    __m512 acc[NR][4];
    for (int t = 0; t < NR; ++t) {
      for (int a = 0; a < 4; ++a) acc[t][a] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      prefetch_ahead(w + i * E, 64 * E);
      __m512 wv[4];
      for (int a = 0; a < 4; ++a) wv[a] = L::load(w + (i + 16 * a) * E);
      for (int t = 0; t < NR; ++t) {
        const uint8_t* xt = x + static_cast<size_t>(t) * xs;
        for (int a = 0; a < 4; ++a) {
          acc[t][a] = _mm512_fmadd_ps(wv[a], L::load(xt + (i + 16 * a) * E), acc[t][a]);
        }
      }
    }
    for (; i < n; i += 16) {  // the rest in steps of 16, the last one masked (zeros past n)
      const __mmask16 m =
          n - i >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 wv = L::load_masked(w + i * E, m);
      for (int t = 0; t < NR; ++t) {
        acc[t][0] = _mm512_fmadd_ps(wv, L::load_masked(x + static_cast<size_t>(t) * xs + i * E, m),
                                    acc[t][0]);
      }
    }
    for (int t = 0; t < NR; ++t) {
      const __m512 s =
          _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
      const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), hi);
      out[t * os] = _mm_cvtss_f32(hsum8(h));
    }
  }
};

DotKernelTable make_table() {
  DotKernelTable t{};
  t.f32 = multi<FloatDot512<Load512F32>>;
  t.f16 = multi<FloatDot512<Load512F16>>;
  t.bf16 = multi<FloatDot512<Load512BF16>>;
  t.q4_0 = multi<Legacy<UnpackQ4_0, VnniOps>>;
  t.q4_1 = multi<Legacy<UnpackQ4_1, VnniOps>>;
  t.q5_0 = multi<Legacy<UnpackQ5_0, VnniOps>>;
  t.q5_1 = multi<Legacy<UnpackQ5_1, VnniOps>>;
  t.q8_0 = multi<Legacy<UnpackQ8_0, VnniOps>>;
  t.q4_k = multi<KQuant45<false, VnniOps>>;
  t.q5_k = multi<KQuant45<true, VnniOps>>;
  t.q6_k = multi<KQuant6<VnniOps>>;
  return t;
}

}  // namespace

const DotKernelTable& dot_kernels_avx512vnni() {
  static const DotKernelTable kTable = make_table();
  return kTable;
}

const DotRowsKernelTable& dot_rows_kernels_avx512vnni() {
  static constexpr DotRowsKernelTable kTable = {
      multi_rows<Legacy<UnpackQ4_0, VnniOps>>, multi_rows<Legacy<UnpackQ4_1, VnniOps>>,
      multi_rows<Legacy<UnpackQ5_0, VnniOps>>, multi_rows<Legacy<UnpackQ5_1, VnniOps>>,
      multi_rows<Legacy<UnpackQ8_0, VnniOps>>,
  };
  return kTable;
}

}  // namespace specdec

#pragma GCC diagnostic pop
