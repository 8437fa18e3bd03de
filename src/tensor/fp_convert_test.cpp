#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/quantize.h"

namespace specdec {
namespace {

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);  // below the rounding midpoint
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // ties to even -> inf
  EXPECT_EQ(fp32_to_fp16(1e9f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);           // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);           // tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(0x1.8p-24f), 0x0002);         // 1.5 units -> 2 (even)
  EXPECT_EQ(fp32_to_fp16(0x1.0p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);       // 1023.5 units: tie rounds up to normal
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);    // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1.8p-10f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(1e-10f), 0x0000);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(Fp16, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(fp32_to_fp16(f), h) << h;
    }
  }
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0xfc00)) && fp16_to_fp32(0xfc00) < 0);
}

// Against the rounding the FPU does when going through double -> nearest half grid.
TEST(Fp16, MatchesExactRoundingOnRandomFloats) {
  uint32_t s = 12345;
  for (int i = 0; i < 200000; ++i) {
    s = s * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>((s & 0x8fffffffu) | 0x30000000u);  // ~2^-31 .. 2^32
    if (!std::isfinite(f)) continue;
    const uint16_t h = fp32_to_fp16(f);
    const float back = fp16_to_fp32(h);
    if (std::fabs(f) >= 65520.0f) {
      EXPECT_TRUE(std::isinf(back));
      continue;
    }
    // back must be a nearest representable half: neighbours are not closer.
    const uint16_t mag = h & 0x7fff;
    const float up = fp16_to_fp32(static_cast<uint16_t>((h & 0x8000) | (mag + 1)));
    const float dn = mag ? fp16_to_fp32(static_cast<uint16_t>((h & 0x8000) | (mag - 1))) : back;
    EXPECT_LE(std::fabs(back - f), std::fabs(up - f)) << f;
    EXPECT_LE(std::fabs(back - f), std::fabs(dn - f)) << f;
  }
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00010000u)), 0x0001);  // subnormal kept
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A signalling-looking NaN whose payload is only in the low bits must stay a NaN.
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(fp32_to_bf16(f), h);
    }
  }
}

}  // namespace
}  // namespace specdec
