// Packing weight matrices into the row-interleaved layouts of packed_blocks.h, done once at
// model load. matmul uses a matrix's packed copy (WeightMatrix::packed) for its full groups of
// 8 rows on every path and thread count, so results stay batch invariant: a given row is
// always computed by the same kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/ggml_type.h"
#include "tensor/matmul.h"

namespace specdec {

// Whether matmul has packed kernels for this weight type (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K,
// Q6_K).
bool packable(GgmlType type);

// Bytes of w's packed copy: its full groups of 8 rows; 0 when the type is not packable or w
// has fewer than 8 rows.
size_t packed_bytes(const WeightMatrix& w);

// Writes w's packed copy into dst (packed_bytes(w) bytes, any alignment).
void pack_weights(const WeightMatrix& w, uint8_t* dst);

// Widens one activation row of n elements from Q8_0 or Q8_1 (act_type) into PackedActBlocks
// (dst: n / 32 blocks), or from Q8_K into PackedActBlockKs (n / 256 blocks), the formats the
// packed kernels read. For Q8_0/Q8_1 the SIMD paths run widen_activation_row_avx2; both give the
// same bytes (tested). Q8_K's widening is a copy plus 8 integer sums per block, scalar on all
// paths.
void widen_activation_row(GgmlType act_type, const uint8_t* src, uint8_t* dst, int64_t n);

// Bytes of one widened row of n elements of act_type (Q8_0, Q8_1 or Q8_K).
size_t widened_row_bytes(GgmlType act_type, int64_t n);

// AVX2 + F16C version (act_quant_avx2.cpp) for Q8_1 (q8_1) or Q8_0 rows; call only when
// cpu_has_avx2() is true.
void widen_activation_row_avx2(bool q8_1, const uint8_t* src, uint8_t* dst, int64_t n);

// The codes of k PackedActBlockK rows of n columns (row stride `stride`) as AMX tiles: for each
// group of 16 rows, each super-block and each 64-column slice of it, 16 rows of 64 bytes
// (1 KiB, contiguous), rows past k zero. A tile load then reads one contiguous KiB instead of 16
// rows scattered a row stride apart, each across two cache lines. The AMX kernels
// (packed_dot_k_amx.cpp) read this layout.
inline constexpr int kActTileRows = 16;        // activation rows per tile
inline constexpr int kActTileSliceBytes = 64;  // columns (bytes) per tile row
size_t tiled_activation_bytes(int64_t k, int64_t n);
// Per-thread scratch for the AMX kernels: `bytes` bytes, 64-byte aligned, slot 0..2, grown and
// kept. Here, in a translation unit compiled for the baseline, because a std::vector used in
// packed_dot_k_amx.cpp would instantiate its inline members there, compiled with AVX-512, and
// the linker may keep that copy for every caller (see quant_blocks.h).
uint8_t* amx_scratch(int slot, size_t bytes);
void tile_activation_rows(const uint8_t* rows, size_t stride, int64_t k, int64_t n, uint8_t* dst);

}  // namespace specdec
