// Activation quantizers: one float row -> the activation format a weight type dots against.
// The rules are llama.cpp's x86 ones (Q8_0/Q8_1: id = 127 / amax, round half to even; Q8_K:
// iscale = -127 / signed absmax, d = 1 / iscale), so the scalar and AVX2 versions produce
// identical bytes and integer dot products match exactly across paths.
// n must be a multiple of the format's block size. dst needs row_bytes(format, n) bytes.
#pragma once

#include <cstdint>

namespace specdec {

void quantize_act_q8_0_scalar(const float* x, uint8_t* dst, int64_t n);
void quantize_act_q8_1_scalar(const float* x, uint8_t* dst, int64_t n);
void quantize_act_q8_k_scalar(const float* x, uint8_t* dst, int64_t n);
void quantize_act_f16_scalar(const float* x, uint8_t* dst, int64_t n);
void quantize_act_bf16_scalar(const float* x, uint8_t* dst, int64_t n);

// AVX2 + F16C versions (act_quant_avx2.cpp); call only when cpu_has_avx2() is true.
void quantize_act_q8_0_avx2(const float* x, uint8_t* dst, int64_t n);
void quantize_act_q8_1_avx2(const float* x, uint8_t* dst, int64_t n);
void quantize_act_q8_k_avx2(const float* x, uint8_t* dst, int64_t n);
void quantize_act_f16_avx2(const float* x, uint8_t* dst, int64_t n);

}  // namespace specdec
