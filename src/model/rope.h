// Rotary position embeddings. Angles are computed in double from the position and then rounded
// to float once, so a token's rotation depends only on its own position.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace specdec {

// Angular frequency of each rotated pair i < rope_dim/2:
//   freq_scale * theta^(-2i / rope_dim) / freq_factors[i]   (freq_factors empty: all 1).
std::vector<double> rope_inv_freqs(const ModelConfig& config, std::span<const float> freq_factors);

// cos/sin of position * inv_freq[i] for every pair.
void rope_angles(std::span<const double> inv_freq, int32_t position, float* cos_out,
                 float* sin_out);

// Rotates the first rope_dim dimensions of each of n_heads heads (head_dim apart) in place.
// Normal pairs (x[2i], x[2i+1]); Neox pairs (x[i], x[i + rope_dim/2]).
void apply_rope(RopeStyle style, float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim,
                const float* cos, const float* sin);

}  // namespace specdec
