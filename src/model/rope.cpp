#include "model/rope.h"

#include <cmath>

#include "common/error.h"

namespace specdec {

std::vector<double> rope_inv_freqs(const ModelConfig& c, std::span<const float> freq_factors) {
  const int32_t n_pairs = c.rope_dim / 2;
  std::vector<double> inv(static_cast<size_t>(n_pairs));
  for (int32_t i = 0; i < n_pairs; ++i) {
    double f = c.rope_freq_scale * std::pow(static_cast<double>(c.rope_theta),
                                            -2.0 * i / static_cast<double>(c.rope_dim));
    if (!freq_factors.empty()) {
      const float ff = freq_factors[static_cast<size_t>(i)];
      if (!(ff > 0) || !std::isfinite(ff))
        fail("rope_freqs.weight[", i, "] = ", ff, " is not positive");
      f /= ff;
    }
    inv[static_cast<size_t>(i)] = f;
  }
  return inv;
}

void rope_angles(std::span<const double> inv_freq, int32_t position, float* cos_out,
                 float* sin_out) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double a = position * inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

void apply_rope(RopeStyle style, float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim,
                const float* cos, const float* sin) {
  const int32_t n_pairs = rope_dim / 2;
  // Normal: pair i is (2i, 2i+1); Neox: pair i is (i, i + n_pairs).
  const int32_t stride = style == RopeStyle::Normal ? 2 : 1;
  const int32_t partner = style == RopeStyle::Normal ? 1 : n_pairs;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<size_t>(h) * head_dim;
    for (int32_t i = 0; i < n_pairs; ++i) {
      float* a = head + i * stride;
      float* b = a + partner;
      const float x0 = *a, x1 = *b;
      *a = x0 * cos[i] - x1 * sin[i];
      *b = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace specdec
