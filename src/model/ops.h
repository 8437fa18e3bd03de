// Small per-token kernels of the forward pass. Every reduction has a fixed order that depends
// only on its length, never on the batch or the thread doing it (batch invariance).
#pragma once

#include <cstdint>

namespace specdec::ops {

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x).
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// x += y
void add(float* x, const float* y, int64_t n);

// gate = silu(gate) * up   (SwiGLU)
void swiglu(float* gate, const float* up, int64_t n);

// gate = gelu(gate) * up   (GeGLU, tanh approximation), computed the way ggml's CPU backend
// does: gelu(x) is looked up in a table of fp16 results indexed by x rounded to fp16 (0 below
// -10, x above 10). Rounding the same way is what keeps us within float noise of llama.cpp.
void geglu(float* gate, const float* up, int64_t n);

// x *= s
void scale(float* x, float s, int64_t n);

}  // namespace specdec::ops
