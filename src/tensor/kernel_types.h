// Function-pointer types shared by the kernel tables. Deliberately free of STL includes: it is
// included by the *_avx2.cpp translation units (see quant_blocks.h for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

// out[t * out_stride] = dot(weight row w, activation row x + t * x_stride) for t < nx; n is
// the number of elements (a multiple of the weight and activation block sizes).
using DotFn = void (*)(int64_t n, const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t nx,
                       float* out, int64_t out_stride);
// The matrix-vector form: out[r * out_stride] = dot(weight row w + r * w_stride, activation row
// x) for r < nw. Each output must be bitwise what DotFn gives for the same rows (same
// operations in the same order); it only saves the per-row call and shares the activation
// block's loads and scale conversion between weight rows.
using DotRowsFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int64_t nw,
                           const uint8_t* x, float* out, int64_t out_stride);
// Converts one float row of n elements into an activation format.
using ActQuantFn = void (*)(const float* x, uint8_t* dst, int64_t n);

// One dot kernel per weight type (activation type implied, see vec_dot.h).
struct DotKernelTable {
  DotFn f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k;
};

const DotKernelTable& dot_kernels_scalar();  // vec_dot_scalar.cpp
const DotKernelTable& dot_kernels_avx2();    // vec_dot_avx2.cpp; only if cpu_has_avx2()
// vec_dot_avx512.cpp; only if cpu_has_avx512_vnni()
const DotKernelTable& dot_kernels_avx512vnni();

// Matrix-vector kernels where a type has one (nullptr otherwise: use DotFn row by row).
struct DotRowsKernelTable {
  DotRowsFn q4_0, q4_1, q5_0, q5_1, q8_0;
};
const DotRowsKernelTable& dot_rows_kernels_avx2();  // vec_dot_avx2.cpp; only if cpu_has_avx2()
// vec_dot_avx512.cpp; only if cpu_has_avx512_vnni()
const DotRowsKernelTable& dot_rows_kernels_avx512vnni();

// Packed kernels (packed_blocks.h): w is one group of 8 interleaved weight rows (n / 32 packed
// blocks), x holds PackedActBlock rows; out[t * out_stride + r] = dot(weight row r of the
// group, activation row t) for r < 8, t < nx.
using PackedDotFn = void (*)(int64_t n, const uint8_t* w, const uint8_t* x, size_t x_stride,
                             int64_t nx, float* out, int64_t out_stride);
struct PackedKernelTable {
  PackedDotFn q4_0, q4_1, q5_0, q8_0;
};
const PackedKernelTable& packed_kernels_scalar();  // packed_dot_scalar.cpp
const PackedKernelTable& packed_kernels_avx2();    // packed_dot_avx2.cpp; only if cpu_has_avx2()
// packed_dot_avx512.cpp; only if cpu_has_avx512_vnni()
const PackedKernelTable& packed_kernels_avx512vnni();
// Two adjacent 8-row groups per call (w: both groups back to back; out rows r < 16), the same
// bits per row as the 8-row kernels; packed_dot16_avx512.cpp, only if cpu_has_avx512_vnni().
const PackedKernelTable& packed16_kernels_avx512vnni();

// The same for the packed K-quants (PackedQ4_Kx8 ...; x holds PackedActBlockK rows).
struct PackedKKernelTable {
  PackedDotFn q4_k, q5_k, q6_k;
};
const PackedKKernelTable& packed_k_kernels_scalar();  // packed_dot_k_scalar.cpp
const PackedKKernelTable& packed_k_kernels_avx2();    // packed_dot_k_avx2.cpp; only with AVX2
// packed_dot_k_avx512.cpp; only if cpu_has_avx512_vnni()
const PackedKKernelTable& packed_k_kernels_avx512vnni();
// Two adjacent 8-row groups per call (w: both groups back to back; out rows r < 16), the same
// bits per row as the 8-row kernels; packed_dot_k16_avx512.cpp, only if cpu_has_avx512_vnni().
const PackedKKernelTable& packed_k16_kernels_avx512vnni();
// The K-quant kernels on AMX-INT8 tiles (packed_dot_k_amx.cpp): four adjacent 8-row groups per
// call (w: the four back to back; out rows r < 32), 16 activation rows at a time, the same bits
// per row as the others; only if cpu_has_amx_int8(). Besides the PackedActBlockK rows (for
// their scales and sums) a tile kernel reads their codes from `tiled`, the layout of
// tile_activation_rows (packed_weights.h).
inline constexpr int kTileWeightRows = 32;
using TileDotFn = void (*)(int64_t n, const uint8_t* w, const uint8_t* x, size_t x_stride,
                           const uint8_t* tiled, int64_t nx, float* out, int64_t out_stride);
struct TileKKernelTable {
  TileDotFn q4_k, q5_k, q6_k;
};
const TileKKernelTable& packed_k_tile_kernels_amx();
// How many tile kernel calls this process has made (for tests: the path is taken where meant).
uint64_t amx_tile_calls();
// One tile multiply checked against plain arithmetic (packed_dot_k_amx.cpp): true if it ran and
// gave the right sums. Runs tile instructions: call it only where a fault may happen (a child
// process, cpu_features.cpp), after the CPUID, XCR0 and kernel-permission checks.
bool amx_tile_probe();

}  // namespace specdec
