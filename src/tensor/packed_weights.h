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

// Whether matmul has packed kernels for this weight type (Q4_0, Q4_1, Q5_0, Q8_0).
bool packable(GgmlType type);

// Bytes of w's packed copy: its full groups of 8 rows; 0 when the type is not packable or w
// has fewer than 8 rows.
size_t packed_bytes(const WeightMatrix& w);

// Writes w's packed copy into dst (packed_bytes(w) bytes, any alignment).
void pack_weights(const WeightMatrix& w, uint8_t* dst);

// Bytes per 32 elements of the activation format the packed kernel for weight_type reads:
// PackedActBlock16 for Q8_0, PackedActBlock for the others.
size_t packed_act_block_bytes(GgmlType weight_type);

// Widens one activation row of n elements from Q8_0 or Q8_1 (act_type, the format weight_type's
// dot kernel quantizes into) into the packed kernels' format for weight_type (dst: n / 32
// blocks of packed_act_block_bytes(weight_type)).
void widen_activation_row(GgmlType weight_type, GgmlType act_type, const uint8_t* src,
                          uint8_t* dst, int64_t n);

}  // namespace specdec
