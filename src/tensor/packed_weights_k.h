// Packing of the K-quant matrices (Q4_K, Q5_K, Q6_K) into the layouts of packed_blocks.h, and
// the widening of Q8_K activation rows for their kernels. Internal to packed_weights.cpp, which
// dispatches on the type; split out because the K-quant layouts move nibbles and bits, not just
// 4-byte chunks.
#pragma once

#include <cstdint>

#include "tensor/matmul.h"

namespace specdec {

// w is Q4_K, Q5_K or Q6_K with at least 8 rows; writes its full groups of 8 rows.
void pack_k_quant_weights(const WeightMatrix& w, uint8_t* dst);

// One Q8_K row of n elements -> n / 256 PackedActBlockKs.
void widen_q8_k_row(const uint8_t* src, uint8_t* dst, int64_t n);

}  // namespace specdec
