#include "tensor/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"
#include "tensor/dequant.h"
#include "tensor/kernel_types.h"
#include "tensor/quant_blocks.h"

namespace specdec {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Max |x - deq(q(x))| allowed, as a fraction of the largest |x| in the block (or of |x| for
// the float types). Derivations: half a quantization step, plus clipping of the value that
// lands one past the top code (Q4_0/Q5_0 use -max/8, -max/16 as the step), plus the 6/8-bit
// rounding of K-quant sub-block scales and mins.
double error_bound(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return 0.0;
    case GgmlType::F16:
      return 1.0 / 2048;
    case GgmlType::BF16:
      return 1.0 / 256;
    case GgmlType::Q8_0:
      return 0.5 / 127 + 0.001;
    case GgmlType::Q4_0:
      return 1.0 / 8 + 0.002;
    case GgmlType::Q5_0:
      return 1.0 / 16 + 0.002;
    case GgmlType::Q4_1:
      return 1.0 / 15 + 0.004;
    case GgmlType::Q5_1:
      return 1.0 / 31 + 0.004;
    case GgmlType::Q4_K:
      return 0.1;
    case GgmlType::Q5_K:
      return 0.06;
    case GgmlType::Q6_K:
      return 0.025;
    default:
      return 0.0;
  }
}

std::vector<float> random_row(int64_t n, uint32_t seed, int dist) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-3.0f, 5.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dist) {
      case 0:
        v[i] = normal(rng);
        break;
      case 1:
        v[i] = uni(rng);
        break;  // asymmetric
      case 2:
        v[i] = normal(rng) * (i % 97 == 0 ? 30.0f : 0.02f);
        break;  // outliers
      default:
        v[i] = std::fabs(normal(rng)) + 1.0f;
        break;  // all positive
    }
  }
  return v;
}

TEST(Quantize, RoundTripWithinBound) {
  for (GgmlType t : kWeightTypes) {
    const int64_t bs = std::max<int64_t>(32, traits(t).block_size);
    const int64_t n = bs * 6;
    for (int dist = 0; dist < 4; ++dist) {
      const std::vector<float> x = random_row(n, 7 + static_cast<uint32_t>(dist), dist);
      std::vector<uint8_t> q(row_bytes(t, n));
      quantize_row(t, x.data(), q.data(), n);
      std::vector<float> y(static_cast<size_t>(n));
      dequantize_row(t, q.data(), y.data(), n);
      const bool per_element = traits(t).block_size == 1;
      for (int64_t b = 0; b < n; b += bs) {
        float amax = 0.0f;
        for (int64_t i = b; i < b + bs; ++i) amax = std::max(amax, std::fabs(x[i]));
        for (int64_t i = b; i < b + bs; ++i) {
          const double scale = per_element ? std::fabs(x[i]) : amax;
          ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]),
                    error_bound(t) * scale + (t == GgmlType::F16 ? 0x1p-25 : 1e-30))
              << type_name(t) << " dist " << dist << " i " << i << " x " << x[i] << " y " << y[i];
        }
      }
    }
  }
}

TEST(Quantize, ZerosStayZero) {
  for (GgmlType t : kWeightTypes) {
    const int64_t n = 512;
    std::vector<float> x(n, 0.0f), y(n, 1.0f);
    std::vector<uint8_t> q(row_bytes(t, n), 0xAB);
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.0f) << type_name(t);
  }
}

TEST(Quantize, MatrixRowsAreIndependentRows) {
  const int64_t rows = 3, cols = 256;
  const std::vector<float> x = random_row(rows * cols, 3, 0);
  for (GgmlType t : kWeightTypes) {
    const std::vector<uint8_t> m = quantize_matrix(t, x.data(), rows, cols);
    const size_t rb = row_bytes(t, cols);
    ASSERT_EQ(m.size(), rb * rows);
    std::vector<uint8_t> one(rb);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(t, x.data() + r * cols, one.data(), cols);
      EXPECT_EQ(std::memcmp(one.data(), m.data() + r * rb, rb), 0);
    }
  }
}

TEST(Quantize, RejectsPartialBlocks) {
  std::vector<float> x(40, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_ANY_THROW(quantize_row(GgmlType::Q4_0, x.data(), q.data(), 40));
  EXPECT_ANY_THROW(dequantize_row(GgmlType::Q4_K, q.data(), x.data(), 40));
}

// Exact quantization of values that lie on the grid.
TEST(Quantize, ExactOnGrid) {
  std::vector<float> x(32), y(32);
  std::vector<uint8_t> q(64);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i % 16) - 8) * 0.5f;
  quantize_row(GgmlType::Q4_0, x.data(), q.data(), 32);
  dequantize_row(GgmlType::Q4_0, q.data(), y.data(), 32);
  EXPECT_EQ(x, y);
  for (int i = 0; i < 32; ++i) x[i] = -1.0f + 0.25f * static_cast<float>(i % 16);
  quantize_row(GgmlType::Q4_1, x.data(), q.data(), 32);
  dequantize_row(GgmlType::Q4_1, q.data(), y.data(), 32);
  EXPECT_EQ(x, y);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) * 0.125f;
  quantize_row(GgmlType::Q5_0, x.data(), q.data(), 32);
  dequantize_row(GgmlType::Q5_0, q.data(), y.data(), 32);
  EXPECT_EQ(x, y);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(4 * i - 127) * 0.25f;
  x[0] = 127 * 0.25f;
  quantize_row(GgmlType::Q8_0, x.data(), q.data(), 32);
  dequantize_row(GgmlType::Q8_0, q.data(), y.data(), 32);
  EXPECT_EQ(x, y);
}

// Hand-built blocks, decoded element by element: catches layout mistakes.
TEST(Dequantize, HandMadeLegacyBlocks) {
  float y[32];
  {
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(0.5f);
    b.qs[0] = 0x1F;  // element 0 = 15, element 16 = 1
    dequantize_row(GgmlType::Q4_0, reinterpret_cast<uint8_t*>(&b), y, 32);
    EXPECT_EQ(y[0], 3.5f);
    EXPECT_EQ(y[16], -3.5f);
    EXPECT_EQ(y[1], -4.0f);
  }
  {
    BlockQ4_1 b{};
    b.d = fp32_to_fp16(1.0f);
    b.m = fp32_to_fp16(-2.0f);
    b.qs[3] = 0x52;
    dequantize_row(GgmlType::Q4_1, reinterpret_cast<uint8_t*>(&b), y, 32);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_EQ(y[19], 3.0f);
    EXPECT_EQ(y[0], -2.0f);
  }
  {
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(1.0f);
    const uint32_t qh = (1u << 0) | (1u << 17);
    std::memcpy(b.qh, &qh, 4);
    b.qs[1] = 0x30;
    dequantize_row(GgmlType::Q5_0, reinterpret_cast<uint8_t*>(&b), y, 32);
    EXPECT_EQ(y[0], 0.0f);     // 16 - 16
    EXPECT_EQ(y[16], -16.0f);  // 0 - 16
    EXPECT_EQ(y[1], -16.0f);
    EXPECT_EQ(y[17], 3.0f);  // (3 | 16) - 16
  }
  {
    BlockQ5_1 b{};
    b.d = fp32_to_fp16(2.0f);
    b.m = fp32_to_fp16(1.0f);
    const uint32_t qh = 1u << 31;
    std::memcpy(b.qh, &qh, 4);
    b.qs[15] = 0xE1;
    dequantize_row(GgmlType::Q5_1, reinterpret_cast<uint8_t*>(&b), y, 32);
    EXPECT_EQ(y[15], 3.0f);   // 1 * 2 + 1
    EXPECT_EQ(y[31], 61.0f);  // (14 | 16) * 2 + 1
  }
  {
    BlockQ8_0 b{};
    b.d = fp32_to_fp16(0.25f);
    b.qs[5] = -7;
    b.qs[31] = 127;
    dequantize_row(GgmlType::Q8_0, reinterpret_cast<uint8_t*>(&b), y, 32);
    EXPECT_EQ(y[5], -1.75f);
    EXPECT_EQ(y[31], 31.75f);
  }
}

// Scales for Q4_K/Q5_K tests: sub-block 0 has sc 3, m 2; sub-block 5 has sc 42, m 21 (both
// with high bits set, so the 6-bit packing across bytes is exercised).
void fill_k_scales(uint8_t* s) {
  s[0] = 3;
  s[4] = 2;
  s[9] = 0x5A;   // sub-block 5: low 4 bits of sc (0xA) and m (0x5)
  s[1] |= 0x80;  // sub-block 5: sc high bits 0b10 in bits 6-7 of scales[1]
  s[5] |= 0x40;  // sub-block 5: m high bits 0b01 in bits 6-7 of scales[5]
}

TEST(Dequantize, HandMadeQ4K) {
  BlockQ4_K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  fill_k_scales(b.scales);
  b.qs[0] = 0x07;       // element 0 (sub-block 0, low nibble)
  b.qs[64 + 3] = 0x90;  // element 128 + 32 + 3 = 163 (sub-block 5, high nibble)
  float y[256];
  dequantize_row(GgmlType::Q4_K, reinterpret_cast<uint8_t*>(&b), y, 256);
  EXPECT_EQ(y[0], 3.0f * 7 - 0.5f * 2);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[163], 42.0f * 9 - 0.5f * 21);
  EXPECT_EQ(y[160], -0.5f * 21);
  EXPECT_EQ(y[32], 0.0f);   // sub-block 1: sc = 0x80 & 63 = 0, m = 0x40 & 63 = 0
  EXPECT_EQ(y[128], 0.0f);  // sub-block 4: all zero
}

TEST(Dequantize, HandMadeQ5K) {
  BlockQ5_K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  fill_k_scales(b.scales);
  b.qs[0] = 0x07;
  b.qh[0] = 0x01;  // element 0: bit 0 -> +16
  b.qs[64 + 3] = 0x90;
  b.qh[3] = 0x20;  // element 163: chunk 2, upper half -> bit 5
  float y[256];
  dequantize_row(GgmlType::Q5_K, reinterpret_cast<uint8_t*>(&b), y, 256);
  EXPECT_EQ(y[0], 3.0f * 23 - 1.0f);
  EXPECT_EQ(y[163], 42.0f * 25 - 0.5f * 21);
  EXPECT_EQ(y[3], -1.0f);  // sub-block 0, q 0
}

TEST(Dequantize, HandMadeQ6K) {
  BlockQ6_K b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j + 1);
  b.scales[12] = -3;
  b.ql[0] = 0x01;
  b.qh[0] = 0x03;  // element 0: q = 1 | 48 = 49 -> 17
  b.ql[50] = 0x0F;
  b.qh[18] = 0x04;  // element 50 (h 0, +32, l 18): q = 15 | 16 = 31 -> -1
  b.ql[64 + 5] = 0xB0;
  b.qh[32 + 5] = 0x20;  // element 197 (h 1, +64, l 5): q = 11 | 32 = 43 -> 11
  float y[256];
  dequantize_row(GgmlType::Q6_K, reinterpret_cast<uint8_t*>(&b), y, 256);
  EXPECT_EQ(y[0], 0.5f * 1 * 17);
  EXPECT_EQ(y[50], 0.5f * 4 * -1);
  EXPECT_EQ(y[197], 0.5f * -3 * 11);
  EXPECT_EQ(y[1], 0.5f * 1 * -32);
  EXPECT_EQ(y[255], 0.5f * 16 * -32);
}

TEST(ActivationQuant, Q8KBlockSumsAndScale) {
  const std::vector<float> x = random_row(512, 11, 0);
  std::vector<uint8_t> q(row_bytes(GgmlType::Q8_K, 512));
  quantize_row(GgmlType::Q8_K, x.data(), q.data(), 512);
  const auto* b = reinterpret_cast<const BlockQ8_K*>(q.data());
  for (int i = 0; i < 2; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[256 * i + j]));
    EXPECT_NEAR(std::fabs(b[i].d) * 127.0f, amax, amax * 1e-6f);
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b[i].qs[16 * g + l];
      EXPECT_EQ(b[i].bsums[g], s);
    }
    for (int j = 0; j < 256; ++j) {
      EXPECT_NEAR(b[i].d * b[i].qs[j], x[256 * i + j], std::fabs(b[i].d) * 0.5f + 1e-7f);
    }
  }
  std::vector<uint8_t> q1(row_bytes(GgmlType::Q8_1, 512));
  quantize_row(GgmlType::Q8_1, x.data(), q1.data(), 512);
  const auto* b1 = reinterpret_cast<const BlockQ8_1*>(q1.data());
  for (int i = 0; i < 16; ++i) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += b1[i].qs[j];
    const float expect = fp16_to_fp32(b1[i].d) * static_cast<float>(s);
    EXPECT_NEAR(fp16_to_fp32(b1[i].s), expect, std::fabs(expect) * 2e-3f + 1e-6f);
  }
}

// The AVX2 activation quantizers must produce the very same bytes as the scalar ones.
TEST(ActivationQuant, Avx2MatchesScalarBytes) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2";
  struct Case {
    GgmlType t;
    ActQuantFn scalar, avx2;
  };
  const Case cases[] = {
      {GgmlType::Q8_0, quantize_act_q8_0_scalar, quantize_act_q8_0_avx2},
      {GgmlType::Q8_1, quantize_act_q8_1_scalar, quantize_act_q8_1_avx2},
      {GgmlType::Q8_K, quantize_act_q8_k_scalar, quantize_act_q8_k_avx2},
      {GgmlType::F16, quantize_act_f16_scalar, quantize_act_f16_avx2},
  };
  for (int dist = 0; dist < 4; ++dist) {
    std::vector<float> x = random_row(1024, 100 + static_cast<uint32_t>(dist), dist);
    // Ties in magnitude with opposite signs, zero blocks and exact .5 products.
    x[3] = -x[700 % 256];
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
    for (int i = 512; i < 544; ++i) x[i] = static_cast<float>(i - 528) * 0.5f;
    // The block's largest magnitude twice with opposite signs: the first one sets the scale's
    // sign (block 3 negative first, in different 8-element groups; block 0 positive first,
    // in one group).
    x[800 + dist] = -1000.0f;
    x[900] = 1000.0f;
    x[10] = 999.0f;
    x[13] = -999.0f;
    for (const Case& c : cases) {
      std::vector<uint8_t> a(row_bytes(c.t, 1024)), b(a.size());
      c.scalar(x.data(), a.data(), 1024);
      c.avx2(x.data(), b.data(), 1024);
      EXPECT_EQ(a, b) << type_name(c.t) << " dist " << dist;
    }
  }
}

}  // namespace
}  // namespace specdec
