#include "tensor/vec_ops.h"

#include "tensor/cpu_features.h"

namespace specdec {

float dot_f32_scalar(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums, so the compiler can keep them in one SSE register pair.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void axpy_f32_scalar(float alpha, const float* x, float* y, int64_t n) {
  // Multiply, then add (two roundings): this file is built without FMA, and the AVX2 version
  // does the same so both paths agree bit for bit.
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return active_isa() == Isa::kAvx2 ? dot_f32_avx2(a, b, n) : dot_f32_scalar(a, b, n);
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
  if (active_isa() == Isa::kAvx2) {
    axpy_f32_avx2(alpha, x, y, n);
  } else {
    axpy_f32_scalar(alpha, x, y, n);
  }
}

void dot_rows_f32(const float* q, const float* rows, int64_t stride, int64_t n_rows, int64_t dim,
                  float* out) {
  if (active_isa() == Isa::kAvx2) {
    dot_rows_f32_avx2(q, rows, stride, n_rows, dim, out);
    return;
  }
  for (int64_t s = 0; s < n_rows; ++s) out[s] = dot_f32_scalar(q, rows + s * stride, dim);
}

void weighted_sum_rows_f32(const float* p, const float* rows, int64_t stride, int64_t n_rows,
                           int64_t dim, float* out) {
  if (active_isa() == Isa::kAvx2) {
    weighted_sum_rows_f32_avx2(p, rows, stride, n_rows, dim, out);
    return;
  }
  for (int64_t s = 0; s < n_rows; ++s) axpy_f32_scalar(p[s], rows + s * stride, out, dim);
}

}  // namespace specdec
