// 8-bit KV cache rows (llama.cpp's q8_0 cache type: blocks of 32 values, one fp16 scale each,
// values round(x / d) in [-127, 127] with d = max |x| / 127) and the attention kernels that
// read them.
//
// Keys live in tiles of 16 rows, interleaved so that one 64-byte load holds 4 consecutive values
// of each of 16 rows: a query's 4 values broadcast against it give 16 rows' partial dot products
// in one VNNI instruction, with no horizontal sums. A score is exact integer arithmetic per
// block plus a fixed float combination of the blocks, so every kernel path (scalar, AVX2,
// AVX-512 VNNI) and every split of the rows gives the same bits, and attention over a q8_0 cache
// stays batch invariant. Values are plain rows, dequantized to floats for the float kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

inline constexpr int64_t kQ8Block = 32;     // values per scale
inline constexpr int64_t kQ8TileRows = 16;  // key rows per tile

// Key tiles. Tile layout for rows r < 16 of dim values (dim a multiple of 32): first dim * 16
// bytes, where value d of row r is at ((d / 4) * 16 + r) * 4 + d % 4 and holds q + 128 (an
// unsigned byte, so VNNI's unsigned x signed product applies); then per block b the 16 rows'
// fp16 scales at 2 * (b * 16 + r) bytes from there.
size_t q8_tile_bytes(int64_t dim);  // 17 * dim
// Quantizes x (dim floats) into row `row` of `tile`; the other rows are untouched.
void store_q8_tile_row(const float* x, int64_t dim, uint8_t* tile, int64_t row);
// Copies row `row` of one tile to the same row of another (same dim).
void copy_q8_tile_row(const uint8_t* from, uint8_t* to, int64_t dim, int64_t row);
// What a stored row holds: its quantized value d (in [-127, 127]) and block b's scale.
int32_t q8_tile_value(const uint8_t* tile, int64_t dim, int64_t row, int64_t d);
float q8_tile_scale(const uint8_t* tile, int64_t dim, int64_t row, int64_t b);

// A query row quantized for scoring against key tiles: dim int8 values, then per block its scale
// (float: a query is never stored, so its scale is not rounded to fp16) and the sum of its
// values.
size_t q8_query_bytes(int64_t dim);  // dim + 8 * dim / 32
void quantize_q8_query(const float* x, int64_t dim, uint8_t* out);

// Scores of nq quantized queries (query j at queries + j * query_stride bytes) against key rows
// [first_row, first_row + n_rows) of consecutive tiles starting at `tiles` (row r in tile r / 16,
// lane r % 16): out[j * out_stride + i] for row first_row + i. For each block b the exact integer
// dot product isum_b of the query's and the key's values, then
//   score = sum over b = 0, 1, ... in order of float(isum_b) * (query scale_b * key scale_b),
// multiply then add, starting from 0. Every path gives these bits for any nq and row range.
void q8_tile_scores(const uint8_t* queries, int64_t query_stride, int64_t nq, const uint8_t* tiles,
                    int64_t dim, int64_t first_row, int64_t n_rows, float* out, int64_t out_stride);

// Value rows: dim int8 values, then dim / 32 fp16 scales.
size_t q8_row_bytes(int64_t dim);  // dim + dim / 16
void quantize_q8_row(const float* x, int64_t dim, uint8_t* row);
// Columns [d0, d0 + nd) of n_rows rows (row s at rows + s * q8_row_bytes(dim)) as floats, scale
// times value (one rounding), out[s * nd + i].
void dequantize_q8_rows(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0, int64_t nd,
                        float* out);

// The paths, exposed for tests (the AVX2 one only when cpu_has_avx2(), the AVX-512 one only
// when cpu_has_avx512_vnni()).
void q8_tile_scores_scalar(const uint8_t* queries, int64_t query_stride, int64_t nq,
                           const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                           float* out, int64_t out_stride);
void q8_tile_scores_avx2(const uint8_t* queries, int64_t query_stride, int64_t nq,
                         const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                         float* out, int64_t out_stride);
void q8_tile_scores_avx512(const uint8_t* queries, int64_t query_stride, int64_t nq,
                           const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                           float* out, int64_t out_stride);
void dequantize_q8_rows_scalar(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0,
                               int64_t nd, float* out);
// Whole blocks only: d0 and nd multiples of 32.
void dequantize_q8_rows_avx2(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0,
                             int64_t nd, float* out);

}  // namespace specdec
