// Byte layouts of ggml's quantized blocks, bit-exact with GGUF files. Plain structs only (no
// inline functions) so that both the baseline and the *_avx2.cpp translation units can include
// this header without risking ODR clashes between differently compiled inline code.
//
// Half-precision fields are stored as raw uint16_t bits (IEEE binary16). All quantized types
// are little-endian on disk and in memory; we only target little-endian hosts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

inline constexpr int kQK = 32;           // elements per block of the legacy formats (Q4_0 ... Q8_1)
inline constexpr int kQK_K = 256;        // elements per super-block of the K-quants
inline constexpr int kKScaleBytes = 12;  // 8 six-bit scales + 8 six-bit mins, packed

// x = d * (q - 8), q in [0, 15]; element j in the low nibble of qs[j], j + 16 in the high one.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in [0, 15]; same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// x = d * (q - 16), q in [0, 31]; low nibbles as Q4_0, bit 4 of element j is bit j of qh
// (read as a little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in [0, 31]; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q, q in [-127, 127]. Also the activation format for Q4_0/Q5_0/Q8_0 weights.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activation format for Q4_1/Q5_1: s = d * sum(qs) (fp16) carries the min term.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in [0, 15], sc/m 6-bit in `scales`
// (j < 4: sc = scales[j] & 63, m = scales[j + 4] & 63; j >= 4: low 4 bits in scales[j + 4]
// (sc low nibble, m high nibble), high 2 bits in the top bits of scales[j - 4] / scales[j]).
// qs: each 64-element chunk c uses 32 bytes, low nibbles = elements 64c..64c+31, high nibbles
// = 64c+32..64c+63.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
// Q4_K plus a fifth bit: element 64c + l (l < 32) takes bit 2c of qh[l], 64c + 32 + l takes
// bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in [0, 63]. Each 128-element half h
// uses ql[64h..64h+63] and qh[32h..32h+31]; for l < 32 element 128h + l + 32i (i = 0..3) has
// low nibble from ql[64h + l + 32(i & 1)] (low nibble for i < 2, high for i >= 2) and high 2
// bits from qh[32h + l] >> 2i.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activation format for the K-quants: x = d * q; bsums[j] = sum of qs[16j .. 16j + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ8_K) == 4);

}  // namespace specdec
