// Reference quantizers. Legacy formats follow ggml's reference rounding rules; the K-quant
// quantizers are a simple min/max fit (not ggml's iterative search): valid, deterministic and
// accurate enough for tests and random models. Activation formats (Q8_0/Q8_1/Q8_K) use the
// exact rules of the matmul activation path (see act_quant.h), so tests can reproduce it.
#include "tensor/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "tensor/act_quant.h"
#include "tensor/quant_blocks.h"

namespace specdec {
namespace {

// Round half to even, as the hardware does under the default rounding mode.
int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }

// Value with the largest magnitude (first one on ties), keeping its sign.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8.0f;  // the extreme value maps to q = 0
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Shared by Q4_1 (nmax 15) and Q5_1 (nmax 31): x ~ d * q + min.
void min_max(const float* x, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int j = 1; j < kQK; ++j) {
    *lo = std::min(*lo, x[j]);
    *hi = std::max(*hi, x[j]);
  }
}

void q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float lo, hi;
    min_max(x, &lo, &hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(lo);
    for (int j = 0; j < kQK / 2; ++j) {
      const int a = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int b = std::min(15, static_cast<int>((x[j + kQK / 2] - lo) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(a | (b << 4));
    }
  }
}

void q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int a = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int b = std::min(31, static_cast<int>(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((a & 0x0f) | ((b & 0x0f) << 4));
      qh |= static_cast<uint32_t>((a >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((b >> 4) & 1) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float lo, hi;
    min_max(x, &lo, &hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int a = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int b = std::min(31, static_cast<int>((x[j + kQK / 2] - lo) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((a & 0x0f) | ((b & 0x0f) << 4));
      qh |= static_cast<uint32_t>((a >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((b >> 4) & 1) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// Q4_K / Q5_K: per 32-element sub-block fit x ~ s * q - m with q in [0, nmax], m >= 0, then
// quantize s and m to 6 bits against the super-block scales d and dmin, then pick each q with
// the scales actually stored. Writes q values (unpacked) to L and the packed scales to y.
void fit_k_scales(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales,
                  uint8_t* L) {
  float sub_scale[8], sub_min[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* v = x + 32 * j;
    float lo = std::min(0.0f, *std::min_element(v, v + 32));
    const float hi = *std::max_element(v, v + 32);
    sub_scale[j] = (hi - lo) / static_cast<float>(nmax);
    sub_min[j] = -lo;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(d > 0.0f ? std::clamp(nearest(sub_scale[j] / d), 0, 63) : 0);
    lm[j] = static_cast<uint8_t>(dmin > 0.0f ? std::clamp(nearest(sub_min[j] / dmin), 0, 63) : 0);
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(ls[j] | ((ls[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(lm[j] | ((lm[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((ls[j + 4] & 0x0f) | ((lm[j + 4] & 0x0f) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const float s = d * static_cast<float>(ls[j]);
    const float m = dmin * static_cast<float>(lm[j]);
    for (int l = 0; l < 32; ++l) {
      const int q = s > 0.0f ? nearest((x[32 * j + l] + m) / s) : 0;
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, nmax));
    }
  }
}

void q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    fit_k_scales(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
      }
    }
  }
}

void q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    fit_k_scales(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[64 * c + l], b = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((a & 0x0f) | ((b & 0x0f) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1)));
      }
    }
  }
}

void q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    // Per 16-element sub-block: x ~ s * (q - 32), s = amax / 31 so that +-amax fits.
    float sub_scale[16], max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
      sub_scale[j] = amax / 31.0f;
      max_scale = std::max(max_scale, sub_scale[j]);
    }
    y[i].d = fp32_to_fp16(max_scale / 127.0f);
    const float d = fp16_to_fp32(y[i].d);
    uint8_t L[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const int ls = d > 0.0f ? std::clamp(nearest(sub_scale[j] / d), 0, 127) : 0;
      y[i].scales[j] = static_cast<int8_t>(ls);
      const float s = d * static_cast<float>(ls);
      for (int l = 0; l < 16; ++l) {
        const int q = s > 0.0f ? nearest(x[16 * j + l] / s) : 0;
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      const uint8_t* q = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = q[l], q1 = q[l + 32], q2 = q[l + 64], q3 = q[l + 96];
        ql[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) |
                                     ((q3 >> 4) << 6));
      }
    }
  }
}

}  // namespace

void quantize_row(GgmlType type, const float* src, uint8_t* dst, int64_t n) {
  const int64_t bs = traits(type).block_size;
  if (n % bs != 0)
    fail("quantize_row: ", n, " is not a multiple of ", bs, " for ", type_name(type));
  const int64_t nb = n / bs;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q4_0:
      return q4_0(src, reinterpret_cast<BlockQ4_0*>(dst), nb);
    case GgmlType::Q4_1:
      return q4_1(src, reinterpret_cast<BlockQ4_1*>(dst), nb);
    case GgmlType::Q5_0:
      return q5_0(src, reinterpret_cast<BlockQ5_0*>(dst), nb);
    case GgmlType::Q5_1:
      return q5_1(src, reinterpret_cast<BlockQ5_1*>(dst), nb);
    case GgmlType::Q8_0:
      return quantize_act_q8_0_scalar(src, dst, n);
    case GgmlType::Q8_1:
      return quantize_act_q8_1_scalar(src, dst, n);
    case GgmlType::Q4_K:
      return q4_k(src, reinterpret_cast<BlockQ4_K*>(dst), nb);
    case GgmlType::Q5_K:
      return q5_k(src, reinterpret_cast<BlockQ5_K*>(dst), nb);
    case GgmlType::Q6_K:
      return q6_k(src, reinterpret_cast<BlockQ6_K*>(dst), nb);
    case GgmlType::Q8_K:
      return quantize_act_q8_k_scalar(src, dst, n);
    default:
      break;
  }
  fail("quantize_row: unsupported tensor type ", type_name(type));
}

std::vector<uint8_t> quantize_matrix(GgmlType type, const float* src, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, src + r * cols, out.data() + r * rb, cols);
  return out;
}

}  // namespace specdec
