// Scalar reference dequantization of one row of any supported weight type.
#pragma once

#include <cstdint>

#include "tensor/ggml_type.h"

namespace specdec {

// Writes n floats decoded from src (row_bytes(type, n) bytes); n must be a multiple of the
// block size. Also accepts the activation formats Q8_1 and Q8_K (handy in tests).
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n);

}  // namespace specdec
