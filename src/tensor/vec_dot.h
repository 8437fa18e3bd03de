// Dot-product kernels: one weight row against several activation rows, per weight type and
// instruction set. Internal to the tensor module (matmul.cpp, tests, benchmarks).
//
// Each kernel computes every output with the same sequence of operations no matter how many
// activation rows it is given (the multi-row AVX2 kernels interleave independent
// accumulators, they never share partial sums), which is what makes matmul batch invariant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/cpu_features.h"
#include "tensor/ggml_type.h"
#include "tensor/kernel_types.h"

namespace specdec {

struct DotKernel {
  GgmlType act_type;    // activation format the weights dot against
  ActQuantFn quantize;  // nullptr: F32 activations are used in place
  DotFn dot;
  DotRowsFn dot_rows = nullptr;  // optional matrix-vector form of dot (one activation row)
  PackedDotFn packed = nullptr;  // kernel for the packed layout, where the type has one
  // Optional: `packed` for two adjacent 8-row groups at once, bitwise the same outputs, used
  // from packed16_min_rows activation rows on (below that `packed` streams the weights faster).
  PackedDotFn packed16 = nullptr;
  int64_t packed16_min_rows = 2;
  // Optional: `packed16` on AMX tiles (the same bits), used from packed_tiles_min_rows
  // activation rows on where amx_enabled().
  TileDotFn packed_tiles = nullptr;
  int64_t packed_tiles_min_rows = 16;
};

// The kernel pair for a weight type on one path. Throws for unsupported weight types; a path
// the CPU cannot run gives the best one it can (kAvx2 without AVX2: the scalar kernels).
const DotKernel& dot_kernel(GgmlType weight, Isa isa);

}  // namespace specdec
