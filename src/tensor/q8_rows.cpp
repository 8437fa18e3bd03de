#include "tensor/q8_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/cpu_features.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

// round(x * id) in [-127, 127]: lrintf (nearest, ties to even) is defined for every input, NaN
// included, where a float-to-int cast is not.
int8_t quantize_value(float x, float id) {
  const long q = std::lrintf(x * id);
  return static_cast<int8_t>(std::clamp<long>(q, -127, 127));
}

// max |x| over one block of 32 (NaNs skipped).
float block_amax(const float* x) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

int64_t tile_byte(int64_t d, int64_t row) { return ((d / 4) * kQ8TileRows + row) * 4 + d % 4; }

// Block b's fp16 scale of row `row`, after the tile's values.
size_t scale_byte(int64_t dim, int64_t b, int64_t row) {
  return static_cast<size_t>(dim * kQ8TileRows + 2 * (b * kQ8TileRows + row));
}
uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

size_t q8_tile_bytes(int64_t dim) { return static_cast<size_t>(dim) * (kQ8TileRows + 1); }

void store_q8_tile_row(const float* x, int64_t dim, uint8_t* tile, int64_t row) {
  for (int64_t b = 0; b < dim / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    const float d = block_amax(xb) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d16 = fp32_to_fp16(d);
    std::memcpy(tile + scale_byte(dim, b, row), &d16, 2);
    for (int64_t i = 0; i < kQ8Block; ++i) {
      const int64_t v = b * kQ8Block + i;
      tile[tile_byte(v, row)] = static_cast<uint8_t>(quantize_value(xb[i], id) + 128);
    }
  }
}

void copy_q8_tile_row(const uint8_t* from, uint8_t* to, int64_t dim, int64_t row) {
  for (int64_t d = 0; d < dim; d += 4)
    std::memcpy(to + tile_byte(d, row), from + tile_byte(d, row), 4);
  for (int64_t b = 0; b < dim / kQ8Block; ++b) {
    std::memcpy(to + scale_byte(dim, b, row), from + scale_byte(dim, b, row), 2);
  }
}

int32_t q8_tile_value(const uint8_t* tile, int64_t dim, int64_t row, int64_t d) {
  (void)dim;
  return static_cast<int32_t>(tile[tile_byte(d, row)]) - 128;
}

float q8_tile_scale(const uint8_t* tile, int64_t dim, int64_t row, int64_t b) {
  return fp16_to_fp32(load_u16(tile + scale_byte(dim, b, row)));
}

size_t q8_query_bytes(int64_t dim) { return static_cast<size_t>(dim + 8 * (dim / kQ8Block)); }

void quantize_q8_query(const float* x, int64_t dim, uint8_t* out) {
  const int64_t nb = dim / kQ8Block;
  auto* qs = reinterpret_cast<int8_t*>(out);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8Block;
    const float d = block_amax(xb) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < kQ8Block; ++i) {
      qs[b * kQ8Block + i] = quantize_value(xb[i], id);
      sum += qs[b * kQ8Block + i];
    }
    std::memcpy(out + dim + 4 * b, &d, 4);
    std::memcpy(out + dim + 4 * (nb + b), &sum, 4);
  }
}

void q8_tile_scores_scalar(const uint8_t* queries, int64_t query_stride, int64_t nq,
                           const uint8_t* tiles, int64_t dim, int64_t first_row, int64_t n_rows,
                           float* out, int64_t out_stride) {
  const int64_t nb = dim / kQ8Block;
  const size_t tile_size = q8_tile_bytes(dim);
  for (int64_t j = 0; j < nq; ++j) {
    const uint8_t* query = queries + j * query_stride;
    const auto* qs = reinterpret_cast<const int8_t*>(query);
    for (int64_t i = 0; i < n_rows; ++i) {
      const int64_t r = first_row + i;
      const uint8_t* tile = tiles + static_cast<size_t>(r / kQ8TileRows) * tile_size;
      const int64_t lane = r % kQ8TileRows;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int64_t d = b * kQ8Block; d < (b + 1) * kQ8Block; ++d) {
          isum +=
              static_cast<int32_t>(qs[d]) * (static_cast<int32_t>(tile[tile_byte(d, lane)]) - 128);
        }
        float dq;
        std::memcpy(&dq, query + dim + 4 * b, 4);
        const float dk = fp16_to_fp32(load_u16(tile + scale_byte(dim, b, lane)));
        acc = acc + static_cast<float>(isum) * (dq * dk);
      }
      out[j * out_stride + i] = acc;
    }
  }
}

void q8_tile_scores(const uint8_t* queries, int64_t query_stride, int64_t nq, const uint8_t* tiles,
                    int64_t dim, int64_t first_row, int64_t n_rows, float* out,
                    int64_t out_stride) {
  const Isa isa = active_isa();
  if (isa == Isa::kAvx512Vnni) {
    q8_tile_scores_avx512(queries, query_stride, nq, tiles, dim, first_row, n_rows, out,
                          out_stride);
  } else if (uses_avx2(isa)) {
    q8_tile_scores_avx2(queries, query_stride, nq, tiles, dim, first_row, n_rows, out, out_stride);
  } else {
    q8_tile_scores_scalar(queries, query_stride, nq, tiles, dim, first_row, n_rows, out,
                          out_stride);
  }
}

size_t q8_row_bytes(int64_t dim) { return static_cast<size_t>(dim + dim / 16); }

void quantize_q8_row(const float* x, int64_t dim, uint8_t* row) {
  auto* qs = reinterpret_cast<int8_t*>(row);
  for (int64_t b = 0; b < dim / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    const float d = block_amax(xb) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d16 = fp32_to_fp16(d);
    std::memcpy(row + dim + 2 * b, &d16, 2);
    for (int64_t i = 0; i < kQ8Block; ++i) qs[b * kQ8Block + i] = quantize_value(xb[i], id);
  }
}

void dequantize_q8_rows(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0, int64_t nd,
                        float* out) {
  if (uses_avx2(active_isa()) && d0 % kQ8Block == 0 && nd % kQ8Block == 0) {
    dequantize_q8_rows_avx2(rows, n_rows, dim, d0, nd, out);
    return;
  }
  dequantize_q8_rows_scalar(rows, n_rows, dim, d0, nd, out);
}

void dequantize_q8_rows_scalar(const uint8_t* rows, int64_t n_rows, int64_t dim, int64_t d0,
                               int64_t nd, float* out) {
  const size_t row_size = q8_row_bytes(dim);
  for (int64_t s = 0; s < n_rows; ++s) {
    const uint8_t* row = rows + static_cast<size_t>(s) * row_size;
    const auto* qs = reinterpret_cast<const int8_t*>(row);
    float* o = out + s * nd;
    for (int64_t i = 0; i < nd;) {
      const int64_t d = d0 + i, b = d / kQ8Block;
      const float scale = fp16_to_fp32(load_u16(row + dim + 2 * b));
      const int64_t end = std::min(nd, (b + 1) * kQ8Block - d0);
      for (; i < end; ++i) o[i] = scale * static_cast<float>(qs[d0 + i]);
    }
  }
}

}  // namespace specdec
