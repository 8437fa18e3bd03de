#include "tensor/vec_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/cpu_features.h"
#include "tensor/quantize.h"

namespace specdec {

namespace {

// Constants of the exp approximation, shared with vec_ops_avx2.cpp through these exact values.
constexpr float kExpHi = 88.0f, kExpLo = -87.3365447504f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

}  // namespace

float exp_f32(float x) {
  x = std::fmin(std::fmax(x, kExpLo), kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = std::fma(kP0, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float r2 = r * r;
  p = std::fma(p, r2, r + 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

void silu_mul_f32(float* gate, const float* up, int64_t n) {
  if (uses_avx2(active_isa())) {
    silu_mul_f32_avx2(gate, up, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + exp_f32(-g)) * up[i];
  }
}

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
  return uses_avx2(active_isa()) ? dot_f32_avx2(a, b, n) : dot_f32_scalar(a, b, n);
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
  if (uses_avx2(active_isa())) {
    axpy_f32_avx2(alpha, x, y, n);
  } else {
    axpy_f32_scalar(alpha, x, y, n);
  }
}

void dot_rows_f32(const float* q, const float* rows, int64_t stride, int64_t n_rows, int64_t dim,
                  float* out) {
  if (uses_avx2(active_isa())) {
    dot_rows_f32_avx2(q, rows, stride, n_rows, dim, out);
    return;
  }
  for (int64_t s = 0; s < n_rows; ++s) out[s] = dot_f32_scalar(q, rows + s * stride, dim);
}

void weighted_sum_rows_f32(const float* p, const float* rows, int64_t stride, int64_t n_rows,
                           int64_t dim, float* out) {
  if (uses_avx2(active_isa())) {
    weighted_sum_rows_f32_avx2(p, rows, stride, n_rows, dim, out);
    return;
  }
  for (int64_t s = 0; s < n_rows; ++s) axpy_f32_scalar(p[s], rows + s * stride, out, dim);
}

void dot_rows_multi_f32(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                        int64_t stride, int64_t n_rows, int64_t dim, float* out,
                        int64_t out_stride) {
  const Isa isa = active_isa();
  if (isa == Isa::kAvx512Vnni) {
    dot_rows_multi_f32_avx512(q, q_stride, nq, rows, stride, n_rows, dim, out, out_stride);
    return;
  }
  if (uses_avx2(isa)) {
    dot_rows_multi_f32_avx2(q, q_stride, nq, rows, stride, n_rows, dim, out, out_stride);
    return;
  }
  for (int64_t j = 0; j < nq; ++j) {
    dot_rows_f32(q + j * q_stride, rows, stride, n_rows, dim, out + j * out_stride);
  }
}

void weighted_sum_rows_multi_f32(const float* p, int64_t p_stride, int64_t nq, const float* rows,
                                 int64_t stride, int64_t n_rows, int64_t dim, float* out,
                                 int64_t out_stride) {
  const Isa isa = active_isa();
  if (isa == Isa::kAvx512Vnni) {
    weighted_sum_rows_multi_f32_avx512(p, p_stride, nq, rows, stride, n_rows, dim, out, out_stride);
    return;
  }
  if (uses_avx2(isa)) {
    weighted_sum_rows_multi_f32_avx2(p, p_stride, nq, rows, stride, n_rows, dim, out, out_stride);
    return;
  }
  for (int64_t j = 0; j < nq; ++j) {
    weighted_sum_rows_f32(p + j * p_stride, rows, stride, n_rows, dim, out + j * out_stride);
  }
}

float softmax_exp_f32_scalar(float* row, int64_t n, float scale) {
  float max_v = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    row[i] *= scale;
    max_v = std::max(max_v, row[i]);
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    row[i] = std::exp(row[i] - max_v);
    sum += row[i];
  }
  return sum;
}

float softmax_exp_f32(float* row, int64_t n, float scale) {
  return uses_avx2(active_isa()) ? softmax_exp_f32_avx2(row, n, scale)
                                 : softmax_exp_f32_scalar(row, n, scale);
}

void exp_shifted_scaled_f64_scalar(const float* x, int64_t n, double shift, double scale,
                                   double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((static_cast<double>(x[i]) - shift) * scale);
}

void exp_shifted_scaled_f64(const float* x, int64_t n, double shift, double scale, double* out) {
  if (uses_avx2(active_isa())) {
    exp_shifted_scaled_f64_avx2(x, n, shift, scale, out);
  } else {
    exp_shifted_scaled_f64_scalar(x, n, shift, scale, out);
  }
}

int64_t argmax_f32_scalar(const float* x, int64_t n) {
  // First strict maximum; a NaN never compares greater and is replaced by whatever follows.
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best] || std::isnan(x[best])) best = i;
  }
  return best;
}

void gelu_table_mul_f32_scalar(float* gate, const float* up, int64_t n, const float* table) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[fp32_to_fp16(x)];
    gate[i] = g * up[i];
  }
}

void gelu_table_mul_f32(float* gate, const float* up, int64_t n, const float* table) {
  if (uses_avx2(active_isa())) {
    gelu_table_mul_f32_avx2(gate, up, n, table);
  } else {
    gelu_table_mul_f32_scalar(gate, up, n, table);
  }
}

float max_f32_scalar(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

float max_f32(const float* x, int64_t n) {
  return uses_avx2(active_isa()) ? max_f32_avx2(x, n) : max_f32_scalar(x, n);
}

int64_t argmax_f32(const float* x, int64_t n) {
  return uses_avx2(active_isa()) ? argmax_f32_avx2(x, n) : argmax_f32_scalar(x, n);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  if (uses_avx2(active_isa())) {
    fp16_to_fp32_row_avx2(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  if (uses_avx2(active_isa())) {
    fp32_to_fp16_row_avx2(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

}  // namespace specdec
