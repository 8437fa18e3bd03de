#include "model/ops.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>

#include "tensor/quantize.h"
#include "tensor/vec_ops.h"

namespace specdec::ops {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Squares summed in double, as ggml does: the norm is cheap, and matching llama.cpp's rounding
  // here keeps Q8 activation roundings downstream from flipping (see the oracle tests).
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i] * x[i]);
  const auto mean_sq = static_cast<float>(sum_sq / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean_sq + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void swiglu(float* gate, const float* up, int64_t n) {
  // Vectorized exp (tensor/vec_ops.h): std::exp per element cost about 4% of a decode step.
  silu_mul_f32(gate, up, n);
}

namespace {

// gelu(x) for every fp16 x, stored rounded to fp16 and widened back, as ggml's
// ggml_table_gelu_f16 holds it (built once, on first use).
const std::array<float, 1 << 16>& gelu_table() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<float, 1 << 16>>();
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoefA = 0.044715f;
    for (uint32_t i = 0; i < (1u << 16); ++i) {
      const float x = fp16_to_fp32(static_cast<uint16_t>(i));
      const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
      (*t)[i] = fp16_to_fp32(fp32_to_fp16(g));
    }
    return t;
  }();
  return *table;
}

}  // namespace

void geglu(float* gate, const float* up, int64_t n) {
  // Vectorized (tensor/vec_ops.h): the per-element fp16 conversion and lookup cost about 3 % of
  // a Gemma verify pass.
  gelu_table_mul_f32(gate, up, n, gelu_table().data());
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace specdec::ops
