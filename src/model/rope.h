// Rotary position embeddings. Angles follow ggml's float recurrence (theta_i = p * s^i with s =
// theta_base^(-2/rope_dim), one float multiplication per pair), so that they round exactly as
// llama.cpp's do: a last-bit difference in a rotation is harmless on its own, but gemma3's
// fp16-rounded GELU turns rare ones into visible logit differences. A token's rotation depends
// only on its own position.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace specdec {

struct RopeFreqs {
  int32_t n_pairs = 0;
  float theta_scale = 1.0f;    // theta_base^(-2 / rope_dim), in float like ggml
  float freq_scale = 1.0f;     // linear scaling
  std::vector<float> factors;  // per-pair divisors (rope_freqs.weight); empty: all 1
};

// Angular frequency of pair i < rope_dim/2 is freq_scale * theta^(-2i / rope_dim) /
// freq_factors[i] (freq_factors empty: all 1). Throws for non-positive factors.
RopeFreqs rope_freqs(const ModelConfig& config, std::span<const float> freq_factors);

// cos/sin of every pair's angle at `position`.
void rope_angles(const RopeFreqs& freqs, int32_t position, float* cos_out, float* sin_out);

// Rotates the first rope_dim dimensions of each of n_heads heads (head_dim apart) in place.
// Normal pairs (x[2i], x[2i+1]); Neox pairs (x[i], x[i + rope_dim/2]).
void apply_rope(RopeStyle style, float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim,
                const float* cos, const float* sin);

}  // namespace specdec
