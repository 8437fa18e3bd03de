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

// ---- K-quants: one packed block is one 256-column super-block of the 8 rows ----
//
// The 4-bit payload of a 32-column sub-block j is 4 loads of 32 bytes; byte 4r + c of load p
// holds column 32j + 4p + c of row r in its low nibble and column 32j + 16 + 4p + c in its high
// nibble (the legacy layout above, per sub-block). "Chunk" k of a sub-block is the low nibbles of
// load k (k < 4) or the high nibbles of load k - 4. Each layout is exactly as large as the 8 source
// rows, so a packed matrix costs the same bandwidth as the original.

// Q4_K x8: x = d * sc[j] * q - dmin * m[j], q in [0, 15]. scales[w][r] is bytes 4w .. 4w + 3 of
// row r's 12 scale bytes (as in BlockQ4_K), so the 6-bit unpacking is 32-bit lane-wise work done
// once for all 8 rows.
struct PackedQ4_Kx8 {
  uint16_t d[kPackRows];
  uint16_t dmin[kPackRows];
  uint32_t scales[3][kPackRows];
  struct Sub {
    uint8_t qs[4][32];
  } subs[kQK_K / kQK];
};
// Q5_K x8: Q4_K plus a fifth bit: bit k of byte i of a sub-block's qh is bit 4 of chunk k's byte
// i (so one shift and mask per chunk lines it up). Each sub-block's qh lies just before its qs,
// so that a block is read front to back (see Q6_K below for what the other order cost).
struct PackedQ5_Kx8 {
  uint16_t d[kPackRows];
  uint16_t dmin[kPackRows];
  uint32_t scales[3][kPackRows];
  struct Sub {
    uint8_t qh[32];
    uint8_t qs[4][32];
  } subs[kQK_K / kQK];
};
// Q6_K x8: x = d * sc[s] * (q - 32), q in [0, 63], 16 sub-blocks s of 16 columns. Group g holds
// columns 32g .. 32g + 31: its ql is their low 4 bits in the 4-bit layout above (so its low-nibble
// chunks 0..3 are sub-block 2g, its high-nibble chunks 4..7 sub-block 2g + 1), and bits 2k, 2k + 1
// of byte i of its qh[u] are the top two bits of chunk 4u + k's byte i. Its scales[2r + e] is the
// scale of sub-block 2g + e of row r: sign-extended to int16 it is the pair (sc[2g], sc[2g + 1])
// of each row in one 32-bit lane. A group's scales, ql and qh lie together, so that a kernel reads
// a block front to back: with the scales, low and high bits in three regions of the block, the
// decode of Qwen2.5-Coder-1.5B Q4_K_M spent about twice the time per byte on its Q6_K matrices
// (output head, half the ffn_down) as on its Q4_K ones, and a 65536 x 1536 Q6_K matvec streamed
// 10 GB/s on one thread where this layout streams 24-27 (2-core EPYC VM, docs/benchmarks.md).
struct PackedQ6_Kx8 {
  uint16_t d[kPackRows];
  struct Group {
    int8_t scales[2 * kPackRows];
    uint8_t ql[4][32];
    uint8_t qh[2][32];
  } groups[kQK_K / kQK];
};

// Activation block for the packed K-quant kernels: a Q8_K block plus the sums of its 32-element
// sub-blocks (bsums[2j] + bsums[2j + 1], at most 32 * 128 in magnitude), which the Q4_K/Q5_K
// min term multiplies two at a time (one 32-bit broadcast per pair of sub-blocks).
struct PackedActBlockK {
  float d;
  int16_t bsums[kQK_K / 16];
  int16_t bsums32[kQK_K / kQK];
  int8_t qs[kQK_K];
};

static_assert(sizeof(PackedQ4_0x8) == kPackRows * sizeof(BlockQ4_0));
static_assert(sizeof(PackedQ4_1x8) == kPackRows * sizeof(BlockQ4_1));
static_assert(sizeof(PackedQ5_0x8) == kPackRows * sizeof(BlockQ5_0));
static_assert(sizeof(PackedQ8_0x8) == kPackRows * sizeof(BlockQ8_0));
static_assert(sizeof(PackedQ4_Kx8) == kPackRows * sizeof(BlockQ4_K));
static_assert(sizeof(PackedQ5_Kx8) == kPackRows * sizeof(BlockQ5_K));
static_assert(sizeof(PackedQ6_Kx8) == kPackRows * sizeof(BlockQ6_K));

}  // namespace specdec
