#include "tensor/act_quant.h"

#include <cmath>
#include <cstring>

#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// Quantizes 32 values with id = 127 / amax; returns d and the integer sum of the quants.
float q8_block(const float* x, int8_t* qs, int* sum) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int s = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = static_cast<int8_t>(round_even(x[j] * id));
    s += qs[j];
  }
  *sum = s;
  return d;
}

}  // namespace

void quantize_act_q8_0_scalar(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum;
    y[i].d = fp32_to_fp16(q8_block(x + i * kQK, y[i].qs, &sum));
  }
}

void quantize_act_q8_1_scalar(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum;
    const float d = q8_block(x + i * kQK, y[i].qs, &sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

void quantize_act_q8_k_scalar(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = round_even(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(s);
    }
    y[i].d = 1.0f / iscale;
  }
}

void quantize_act_f16_scalar(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

void quantize_act_bf16_scalar(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(x[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

}  // namespace specdec
