#include "model/rope.h"

#include <cmath>

#include "common/error.h"

namespace specdec {

RopeFreqs rope_freqs(const ModelConfig& c, std::span<const float> freq_factors) {
  RopeFreqs r;
  r.n_pairs = c.rope_dim / 2;
  r.theta_scale = std::pow(c.rope_theta, -2.0f / static_cast<float>(c.rope_dim));
  r.freq_scale = c.rope_freq_scale;
  for (size_t i = 0; i < freq_factors.size(); ++i) {
    const float ff = freq_factors[i];
    if (!(ff > 0) || !std::isfinite(ff))
      fail("rope_freqs.weight[", i, "] = ", ff, " is not positive");
  }
  r.factors.assign(freq_factors.begin(), freq_factors.end());
  return r;
}

void rope_angles(const RopeFreqs& f, int32_t position, float* cos_out, float* sin_out) {
  // ggml_rope_cache_init with rope_yarn at ext_factor 0 and attn_factor 1.
  float theta = static_cast<float>(position);
  for (int32_t i = 0; i < f.n_pairs; ++i) {
    const float ff = f.factors.empty() ? 1.0f : f.factors[static_cast<size_t>(i)];
    const float a = f.freq_scale * (theta / ff);
    cos_out[i] = std::cos(a);
    sin_out[i] = std::sin(a);
    theta *= f.theta_scale;
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
