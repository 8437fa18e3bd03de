// Scalar reference decoders, written straight from the block layouts in quant_blocks.h. They
// are the ground truth for tests and serve embedding lookups.
#include "tensor/dequant.h"

#include <cstring>

#include "common/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

template <typename Block>
const Block* blocks(const uint8_t* src) {
  return reinterpret_cast<const Block*>(src);
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block.
void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void deq_q4_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ4_0& b = blocks<BlockQ4_0>(src)[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void deq_q4_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ4_1& b = blocks<BlockQ4_1>(src)[i];
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0x0f) * d + m;
      y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void deq_q5_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ5_0& b = blocks<BlockQ5_0>(src)[i];
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

void deq_q5_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ5_1& b = blocks<BlockQ5_1>(src)[i];
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void deq_q8_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ8_0& b = blocks<BlockQ8_0>(src)[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void deq_q8_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const BlockQ8_1& b = blocks<BlockQ8_1>(src)[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void deq_q4_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_K& b = blocks<BlockQ4_K>(src)[i];
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    const uint8_t* q = b.qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      int sc0, m0, sc1, m1;
      k_scale_min(b.scales, 2 * c, &sc0, &m0);
      k_scale_min(b.scales, 2 * c + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
      for (int l = 0; l < 32; ++l) *y++ = d0 * static_cast<float>(q[l] & 0x0f) - mm0;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] >> 4) - mm1;
    }
  }
}

void deq_q5_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ5_K& b = blocks<BlockQ5_K>(src)[i];
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    const uint8_t* q = b.qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      int sc0, m0, sc1, m1;
      k_scale_min(b.scales, 2 * c, &sc0, &m0);
      k_scale_min(b.scales, 2 * c + 1, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
      const uint8_t u0 = static_cast<uint8_t>(1u << (2 * c)), u1 = static_cast<uint8_t>(u0 << 1);
      for (int l = 0; l < 32; ++l) {
        *y++ = d0 * static_cast<float>((q[l] & 0x0f) + ((b.qh[l] & u0) ? 16 : 0)) - mm0;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((q[l] >> 4) + ((b.qh[l] & u1) ? 16 : 0)) - mm1;
      }
    }
  }
}

void deq_q6_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_K& b = blocks<BlockQ6_K>(src)[i];
    const float d = fp16_to_fp32(b.d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q3);
      }
    }
  }
}

void deq_q8_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const BlockQ8_K& b = blocks<BlockQ8_K>(src)[i];
    for (int j = 0; j < kQK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
  }
}

}  // namespace

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  const int64_t bs = traits(type).block_size;
  if (n % bs != 0)
    fail("dequantize_row: ", n, " is not a multiple of ", bs, " for ", type_name(type));
  const int64_t nb = n / bs;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    case GgmlType::Q4_0:
      return deq_q4_0(src, dst, nb);
    case GgmlType::Q4_1:
      return deq_q4_1(src, dst, nb);
    case GgmlType::Q5_0:
      return deq_q5_0(src, dst, nb);
    case GgmlType::Q5_1:
      return deq_q5_1(src, dst, nb);
    case GgmlType::Q8_0:
      return deq_q8_0(src, dst, nb);
    case GgmlType::Q8_1:
      return deq_q8_1(src, dst, nb);
    case GgmlType::Q4_K:
      return deq_q4_k(src, dst, nb);
    case GgmlType::Q5_K:
      return deq_q5_k(src, dst, nb);
    case GgmlType::Q6_K:
      return deq_q6_k(src, dst, nb);
    case GgmlType::Q8_K:
      return deq_q8_k(src, dst, nb);
    default:
      break;
  }
  fail("dequantize_row: unsupported tensor type ", type_name(type));
}

}  // namespace specdec
