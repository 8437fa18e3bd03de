// AVX2 activation quantizers (placeholder: scalar until the SIMD versions land).
#include "tensor/act_quant.h"

namespace specdec {
void quantize_act_q8_0_avx2(const float* x, uint8_t* dst, int64_t n) {
  quantize_act_q8_0_scalar(x, dst, n);
}
void quantize_act_q8_1_avx2(const float* x, uint8_t* dst, int64_t n) {
  quantize_act_q8_1_scalar(x, dst, n);
}
void quantize_act_q8_k_avx2(const float* x, uint8_t* dst, int64_t n) {
  quantize_act_q8_k_scalar(x, dst, n);
}
void quantize_act_f16_avx2(const float* x, uint8_t* dst, int64_t n) {
  quantize_act_f16_scalar(x, dst, n);
}
}  // namespace specdec
