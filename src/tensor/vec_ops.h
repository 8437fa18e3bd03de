// Float vector primitives for attention (q.k scores, probability-weighted V sums), with the
// instruction set chosen at run time like the matmul kernels. Each result depends only on its
// inputs and the active path, never on what else is computed, so attention stays batch
// invariant.
#pragma once

#include <cstdint>

namespace specdec {

// sum_i a[i] * b[i].
float dot_f32(const float* a, const float* b, int64_t n);

// y[i] += alpha * x[i].
void axpy_f32(float alpha, const float* x, float* y, int64_t n);

// Scalar and AVX2 versions (the AVX2 ones only when cpu_has_avx2()); exposed for tests.
float dot_f32_scalar(const float* a, const float* b, int64_t n);
void axpy_f32_scalar(float alpha, const float* x, float* y, int64_t n);
float dot_f32_avx2(const float* a, const float* b, int64_t n);
void axpy_f32_avx2(float alpha, const float* x, float* y, int64_t n);

}  // namespace specdec
