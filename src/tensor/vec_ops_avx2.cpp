// AVX2/FMA float primitives; compiled with -mavx2 -mfma -mf16c, reached only after
// cpu_has_avx2(). Raw intrinsics, no STL (see simd_avx2.h).
#include <immintrin.h>

#include "tensor/simd_avx2.h"
#include "tensor/vec_ops.h"

namespace specdec {

float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (i + 8 <= n) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    i += 8;
  }
  float sum = _mm_cvtss_f32(hsum8(_mm256_add_ps(s0, s1)));
  for (; i < n; ++i) sum = __builtin_fmaf(a[i], b[i], sum);
  return sum;
}

void axpy_f32_avx2(float alpha, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = __builtin_fmaf(alpha, x[i], y[i]);
}

}  // namespace specdec
