// Row-interleaved ("packed") weight layouts: 8 consecutive weight rows stored block by block so
// that one 32-byte vector holds 4 consecutive columns of each of the 8 rows. A kernel then
// multiplies it with one broadcast 4-byte group of an activation row and gets, in each 32-bit
// lane, a partial dot product of a *different* weight row. The per-block scale work (int ->
// float conversion, scale multiply, accumulate) is done once for 8 rows instead of once per row,
// which is what made the one-row-at-a-time kernels compute bound for k > 1 activation rows.
// Same idea as llama.cpp's "repacked" CPU buffers; the layout here is our own.
//
// Plain structs only (see quant_blocks.h for why). Group g, block b of a packed matrix is at
// packed + (g * blocks_per_row + b) * sizeof(block); rows past the last full group of 8 are not
// packed and run through the ordinary kernels.
//
// Chunk p of `qs` covers columns 4p .. 4p+3 of the block: byte 4r + c of a chunk is column
// 4p + c of row r. For the 4-bit formats one byte carries two chunks: its low nibble belongs to
// chunk p (columns 4p..4p+3), its high nibble to chunk p + 4 (columns 16+4p..16+4p+3), matching
// the low/high nibble split of the unpacked formats.
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace specdec {

inline constexpr int kPackRows = 8;

// Q4_0 x8: q in [0, 15], x = d * (q - 8).
struct PackedQ4_0x8 {
  uint16_t d[kPackRows];
  uint8_t qs[kPackRows * kQK / 2];
};
// Q4_1 x8: q in [0, 15], x = d * q + m.
struct PackedQ4_1x8 {
  uint16_t d[kPackRows];
  uint16_t m[kPackRows];
  uint8_t qs[kPackRows * kQK / 2];
};
// Q5_0 x8: q in [0, 31], x = d * (q - 16). Low nibbles as Q4_0; qh[s] holds bit 4 of the 32
// elements of chunk s (s < 4: the low-nibble chunks, s >= 4: the high-nibble chunks), bit i
// for byte i of the chunk.
struct PackedQ5_0x8 {
  uint16_t d[kPackRows];
  uint32_t qh[kPackRows];
  uint8_t qs[kPackRows * kQK / 2];
};
// Q8_0 x8: q in [-128, 127], x = d * q.
struct PackedQ8_0x8 {
  uint16_t d[kPackRows];
  int8_t qs[kPackRows * kQK];
};

// Activation block for the packed kernels: a Q8_0 or Q8_1 block with its fp16 scale d (and,
// for Q8_1, s = d * sum(qs)) widened to float once per matmul, so that a kernel broadcasts it
// straight from memory instead of converting it again for every group of 8 weight rows, and
// the integer sum of its quants, which lets Q4_0 and Q5_0 multiply their unsigned codes q and
// subtract offset * sum once per block (sum((q - offset) * y) exactly) instead of sign-fixing
// every product. The widening is exact, so results are the same bits as converting in the
// kernel.
struct PackedActBlock {
  float d;
  float s;      // 0 when widened from Q8_0
  int32_t sum;  // sum of qs
  int8_t qs[kQK];
};

static_assert(sizeof(PackedQ4_0x8) == kPackRows * sizeof(BlockQ4_0));
static_assert(sizeof(PackedQ4_1x8) == kPackRows * sizeof(BlockQ4_1));
static_assert(sizeof(PackedQ5_0x8) == kPackRows * sizeof(BlockQ5_0));
static_assert(sizeof(PackedQ8_0x8) == kPackRows * sizeof(BlockQ8_0));

}  // namespace specdec
