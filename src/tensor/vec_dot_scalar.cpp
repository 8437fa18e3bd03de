// Scalar dot kernels. Integer parts are exact; per-block float terms are accumulated in block
// order. They are also the reference the AVX2 kernels are tested against.
#include <cstring>

#include "tensor/kernel_types.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

template <typename Block>
const Block* as(const uint8_t* p) {
  return reinterpret_cast<const Block*>(p);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// 6-bit scales and mins of a Q4_K/Q5_K super-block, unpacked.
void k_scales(const uint8_t* s, int sc[8], int m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
    m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

// The single-row kernels are kept out of line so every caller runs the very same code
// (no call-site-specific contraction or vectorization that could change rounding).
[[gnu::noinline]] float one_f32(int64_t n, const uint8_t* w, const uint8_t* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float a, b;
    std::memcpy(&a, w + 4 * i, 4);
    std::memcpy(&b, x + 4 * i, 4);
    sum += static_cast<double>(a) * static_cast<double>(b);
  }
  return static_cast<float>(sum);
}

// Products of two halves (or two bfloat16s) are exact in double; the sum is rounded once.
[[gnu::noinline]] float one_f16(int64_t n, const uint8_t* w, const uint8_t* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(fp16_to_fp32(load_u16(w + 2 * i))) *
           static_cast<double>(fp16_to_fp32(load_u16(x + 2 * i)));
  }
  return static_cast<float>(sum);
}

[[gnu::noinline]] float one_bf16(int64_t n, const uint8_t* w, const uint8_t* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(bf16_to_fp32(load_u16(w + 2 * i))) *
           static_cast<double>(bf16_to_fp32(load_u16(x + 2 * i)));
  }
  return static_cast<float>(sum);
}

[[gnu::noinline]] float one_q4_0(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ4_0>(w);
  const auto* b = as<BlockQ8_0>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int s = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      s += ((a[i].qs[j] & 0x0f) - 8) * b[i].qs[j];
      s += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + kQK / 2];
    }
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(s);
  }
  return sum;
}

[[gnu::noinline]] float one_q4_1(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ4_1>(w);
  const auto* b = as<BlockQ8_1>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int s = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      s += (a[i].qs[j] & 0x0f) * b[i].qs[j];
      s += (a[i].qs[j] >> 4) * b[i].qs[j + kQK / 2];
    }
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(s) +
           fp16_to_fp32(a[i].m) * fp16_to_fp32(b[i].s);
  }
  return sum;
}

[[gnu::noinline]] float one_q5_0(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ5_0>(w);
  const auto* b = as<BlockQ8_0>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_u32(a[i].qh);
    int s = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = ((a[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
      const int hi = ((a[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16;
      s += lo * b[i].qs[j] + hi * b[i].qs[j + kQK / 2];
    }
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(s);
  }
  return sum;
}

[[gnu::noinline]] float one_q5_1(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ5_1>(w);
  const auto* b = as<BlockQ8_1>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_u32(a[i].qh);
    int s = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (a[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (a[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      s += lo * b[i].qs[j] + hi * b[i].qs[j + kQK / 2];
    }
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(s) +
           fp16_to_fp32(a[i].m) * fp16_to_fp32(b[i].s);
  }
  return sum;
}

[[gnu::noinline]] float one_q8_0(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ8_0>(w);
  const auto* b = as<BlockQ8_0>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int s = 0;
    for (int j = 0; j < kQK; ++j) s += a[i].qs[j] * b[i].qs[j];
    sum += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(s);
  }
  return sum;
}

// Q4_K/Q5_K: sum_j sc[j] * dot(q, y) - m[j] * (sum of y over the sub-block), all integer,
// then d * y.d * sumi - dmin * y.d * summ per super-block.
[[gnu::noinline]] float one_q4_k(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ4_K>(w);
  const auto* b = as<BlockQ8_K>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], m[8];
    k_scales(a[i].scales, sc, m);
    int sumi = 0, summ = 0;
    for (int c = 0; c < 4; ++c) {
      int s0 = 0, s1 = 0;
      const uint8_t* q = a[i].qs + 32 * c;
      const int8_t* y = b[i].qs + 64 * c;
      for (int l = 0; l < 32; ++l) {
        s0 += (q[l] & 0x0f) * y[l];
        s1 += (q[l] >> 4) * y[l + 32];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    const float dx = b[i].d;
    sum += dx * fp16_to_fp32(a[i].d) * static_cast<float>(sumi) -
           dx * fp16_to_fp32(a[i].dmin) * static_cast<float>(summ);
  }
  return sum;
}

[[gnu::noinline]] float one_q5_k(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ5_K>(w);
  const auto* b = as<BlockQ8_K>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], m[8];
    k_scales(a[i].scales, sc, m);
    int sumi = 0, summ = 0;
    for (int c = 0; c < 4; ++c) {
      int s0 = 0, s1 = 0;
      const uint8_t* q = a[i].qs + 32 * c;
      const int8_t* y = b[i].qs + 64 * c;
      for (int l = 0; l < 32; ++l) {
        const int h0 = ((a[i].qh[l] >> (2 * c)) & 1) << 4;
        const int h1 = ((a[i].qh[l] >> (2 * c + 1)) & 1) << 4;
        s0 += ((q[l] & 0x0f) | h0) * y[l];
        s1 += ((q[l] >> 4) | h1) * y[l + 32];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    const float dx = b[i].d;
    sum += dx * fp16_to_fp32(a[i].d) * static_cast<float>(sumi) -
           dx * fp16_to_fp32(a[i].dmin) * static_cast<float>(summ);
  }
  return sum;
}

[[gnu::noinline]] float one_q6_k(int64_t n, const uint8_t* w, const uint8_t* x) {
  const auto* a = as<BlockQ6_K>(w);
  const auto* b = as<BlockQ8_K>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = a[i].ql + 64 * h;
      const uint8_t* qh = a[i].qh + 32 * h;
      const int8_t* sc = a[i].scales + 8 * h;
      const int8_t* y = b[i].qs + 128 * h;
      for (int half = 0; half < 2; ++half) {  // l in [0,16) then [16,32): one scale each
        int s[4] = {0, 0, 0, 0};
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          s[0] += q0 * y[l];
          s[1] += q1 * y[l + 32];
          s[2] += q2 * y[l + 64];
          s[3] += q3 * y[l + 96];
        }
        for (int g = 0; g < 4; ++g) sumi += sc[half + 2 * g] * s[g];
      }
    }
    sum += b[i].d * fp16_to_fp32(a[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

template <float (*Single)(int64_t, const uint8_t*, const uint8_t*)>
void multi(int64_t n, const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t nx, float* out,
           int64_t out_stride) {
  for (int64_t t = 0; t < nx; ++t) {
    out[t * out_stride] = Single(n, w, x + static_cast<size_t>(t) * x_stride);
  }
}

}  // namespace

const DotKernelTable& dot_kernels_scalar() {
  static constexpr DotKernelTable kTable = {
      multi<one_f32>,  multi<one_f16>,  multi<one_bf16>, multi<one_q4_0>,
      multi<one_q4_1>, multi<one_q5_0>, multi<one_q5_1>, multi<one_q8_0>,
      multi<one_q4_k>, multi<one_q5_k>, multi<one_q6_k>,
  };
  return kTable;
}

}  // namespace specdec
