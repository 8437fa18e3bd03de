// Reference quantizers (float -> ggml block formats) and scalar fp16/bf16 conversions. Used by
// tests, by the tiny-random-model generator and to quantize activations on the scalar path.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/ggml_type.h"

namespace specdec {

// Valid (not necessarily optimal) quantization of n floats; n must be a multiple of the block
// size. Supports every weight type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K) and the activation types Q8_1 and Q8_K.
void quantize_row(GgmlType type, const float* src, uint8_t* dst, int64_t n);
// rows x cols, row-major, rows packed back to back (row stride = row_bytes(type, cols)).
std::vector<uint8_t> quantize_matrix(GgmlType type, const float* src, int64_t rows, int64_t cols);

// IEEE binary16 / bfloat16 conversions, round-to-nearest-even, inf/nan/subnormals preserved.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace specdec
