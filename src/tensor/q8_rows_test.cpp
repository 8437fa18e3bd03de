// q8 KV rows: what a stored key or value row holds (llama.cpp's q8_0 rounding, within half a
// step of the input), and the score kernels against a plain loop over those stored integers and
// scales, bit for bit on every path, for every query count and row range (tiles cut anywhere).
#include "tensor/q8_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

float query_scale(const std::vector<uint8_t>& q, int64_t dim, int64_t b) {
  float d;
  std::memcpy(&d, q.data() + dim + 4 * b, 4);
  return d;
}

TEST(Q8Rows, AStoredKeyRowIsWithinHalfAStepOfItsInputAndLeavesTheOtherRows) {
  for (int64_t dim : {32, 64, 128, 256}) {
    std::vector<uint8_t> tile(q8_tile_bytes(dim), 0x5A);
    const std::vector<uint8_t> before = tile;
    std::vector<float> x = testing::random_floats(static_cast<size_t>(dim), 3);
    if (dim > kQ8Block) std::fill_n(x.begin() + kQ8Block, kQ8Block, 0.0f);  // scale 0
    x[5] = 40.0f;  // an outlier sets block 0's step
    store_q8_tile_row(x.data(), dim, tile.data(), 7);
    for (int64_t b = 0; b < dim / kQ8Block; ++b) {
      float amax = 0.0f;
      for (int64_t i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[b * kQ8Block + i]));
      const float step = q8_tile_scale(tile.data(), dim, 7, b);
      EXPECT_EQ(step, fp16_to_fp32(fp32_to_fp16(amax / 127.0f)));
      for (int64_t i = 0; i < kQ8Block; ++i) {
        const int64_t d = b * kQ8Block + i;
        const int32_t v = q8_tile_value(tile.data(), dim, 7, d);
        EXPECT_LE(std::abs(v), 127);
        EXPECT_NEAR(step * static_cast<float>(v), x[d], 0.5f * step * 1.01f + 1e-7f) << d;
      }
    }
    EXPECT_EQ(q8_tile_value(tile.data(), dim, 7, 5), 127);
    // Only row 7's bytes changed.
    std::vector<uint8_t> other(q8_tile_bytes(dim), 0x5A);
    copy_q8_tile_row(tile.data(), other.data(), dim, 7);
    EXPECT_EQ(other, tile);
    size_t changed = 0;
    for (size_t i = 0; i < tile.size(); ++i) changed += tile[i] != before[i];
    EXPECT_LE(changed, static_cast<size_t>(dim + 2 * dim / kQ8Block));
    EXPECT_GT(changed, static_cast<size_t>(dim / 2));
  }
}

TEST(Q8Rows, AValueRowDequantizesToScaleTimesValueWithinHalfAStep) {
  const int64_t dim = 128;
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(dim), 11);
  std::vector<uint8_t> row(q8_row_bytes(dim));
  quantize_q8_row(x.data(), dim, row.data());
  std::vector<float> all(static_cast<size_t>(dim)), dispatched(all.size());
  dequantize_q8_rows_scalar(row.data(), 1, dim, 0, dim, all.data());
  dequantize_q8_rows(row.data(), 1, dim, 0, dim, dispatched.data());
  EXPECT_EQ(dispatched, all);
  for (int64_t d = 0; d < dim; ++d) {
    float amax = 0.0f;
    for (int64_t i = d / kQ8Block * kQ8Block; i < (d / kQ8Block + 1) * kQ8Block; ++i) {
      amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
    }
    const float step = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    EXPECT_NEAR(all[static_cast<size_t>(d)], x[static_cast<size_t>(d)], 0.5f * step * 1.01f);
    EXPECT_EQ(all[static_cast<size_t>(d)],
              step * static_cast<float>(reinterpret_cast<const int8_t*>(row.data())[d]));
  }
  // The AVX2 path gives the scalar floats.
  if (cpu_supports(Isa::kAvx2)) {
    std::vector<float> fast(static_cast<size_t>(dim), -1.0f);
    dequantize_q8_rows_avx2(row.data(), 1, dim, 0, dim, fast.data());
    EXPECT_EQ(std::memcmp(fast.data(), all.data(), sizeof(float) * all.size()), 0);
    std::vector<float> scalar(32), wide(32);
    dequantize_q8_rows_scalar(row.data(), 1, dim, 64, 32, scalar.data());
    dequantize_q8_rows_avx2(row.data(), 1, dim, 64, 32, wide.data());
    EXPECT_EQ(scalar, wide);
  }
  // A column range across a block boundary, of two rows, is the same floats.
  std::vector<uint8_t> rows(2 * row.size());
  std::copy(row.begin(), row.end(), rows.begin());
  std::copy(row.begin(), row.end(), rows.begin() + static_cast<std::ptrdiff_t>(row.size()));
  std::vector<float> part(2 * 40);
  dequantize_q8_rows(rows.data(), 2, dim, 20, 40, part.data());
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(part[s * 40 + i], all[20 + i]);
  }
}

// The definition, from the stored integers and scales.
float reference_score(const std::vector<uint8_t>& q, const std::vector<uint8_t>& tiles, int64_t dim,
                      int64_t r) {
  const uint8_t* tile = tiles.data() + static_cast<size_t>(r / kQ8TileRows) * q8_tile_bytes(dim);
  const auto* qs = reinterpret_cast<const int8_t*>(q.data());
  float acc = 0.0f;
  for (int64_t b = 0; b < dim / kQ8Block; ++b) {
    int32_t isum = 0;
    for (int64_t d = b * kQ8Block; d < (b + 1) * kQ8Block; ++d) {
      isum += qs[d] * q8_tile_value(tile, dim, r % kQ8TileRows, d);
    }
    acc = acc + static_cast<float>(isum) *
                    (query_scale(q, dim, b) * q8_tile_scale(tile, dim, r % kQ8TileRows, b));
  }
  return acc;
}

TEST(Q8Rows, ScoresEqualTheLoopOverStoredValuesOnEveryPathAndRange) {
  for (int64_t dim : {32, 64, 128, 256}) {
    const int64_t n_rows = 70;  // 5 tiles, the last one partly filled
    const int64_t n_tiles = (n_rows + kQ8TileRows - 1) / kQ8TileRows;
    std::vector<uint8_t> tiles(static_cast<size_t>(n_tiles) * q8_tile_bytes(dim), 0);
    const std::vector<float> keys =
        testing::random_floats(static_cast<size_t>(n_rows * dim), static_cast<uint32_t>(dim));
    for (int64_t r = 0; r < n_rows; ++r) {
      store_q8_tile_row(keys.data() + r * dim, dim,
                        tiles.data() + static_cast<size_t>(r / kQ8TileRows) * q8_tile_bytes(dim),
                        r % kQ8TileRows);
    }
    const int64_t max_q = 12;
    const std::vector<float> qf = testing::random_floats(static_cast<size_t>(max_q * dim), 77);
    const int64_t qb = static_cast<int64_t>(q8_query_bytes(dim));
    std::vector<uint8_t> queries(static_cast<size_t>(max_q * qb));
    std::vector<std::vector<uint8_t>> one(static_cast<size_t>(max_q));
    for (int64_t j = 0; j < max_q; ++j) {
      quantize_q8_query(qf.data() + j * dim, dim, queries.data() + j * qb);
      one[static_cast<size_t>(j)].assign(queries.begin() + j * qb, queries.begin() + (j + 1) * qb);
      // The scores approximate the float dot products (two 8-bit roundings).
      for (int64_t r = 0; r < n_rows; r += 13) {
        double exact = 0.0, mag = 0.0;
        for (int64_t d = 0; d < dim; ++d) {
          exact += double{qf[j * dim + d]} * keys[r * dim + d];
          mag += std::fabs(double{qf[j * dim + d]} * keys[r * dim + d]);
        }
        EXPECT_NEAR(reference_score(one[static_cast<size_t>(j)], tiles, dim, r), exact,
                    0.02 * mag + 1e-6);
      }
    }
    struct Range {
      int64_t first, n;
    };
    for (const Range range : {Range{0, 70}, Range{0, 16}, Range{3, 9}, Range{5, 40}, Range{16, 17},
                              Range{31, 1}, Range{64, 6}}) {
      for (int64_t nq : {1, 2, 3, 5, 6, 7, 8, 9, 12}) {
        const int64_t out_stride = 80;
        for (Isa isa : kAllIsas) {
          if (!cpu_supports(isa)) continue;
          std::vector<float> out(static_cast<size_t>(nq * out_stride), -3.0f);
          const Isa saved = active_isa();
          set_active_isa(isa);
          q8_tile_scores(queries.data(), qb, nq, tiles.data(), dim, range.first, range.n,
                         out.data(), out_stride);
          set_active_isa(saved);
          for (int64_t j = 0; j < nq; ++j) {
            for (int64_t i = 0; i < out_stride; ++i) {
              const float got = out[static_cast<size_t>(j * out_stride + i)];
              if (i >= range.n) {
                ASSERT_EQ(got, -3.0f) << "wrote past the range";
                continue;
              }
              const float want =
                  reference_score(one[static_cast<size_t>(j)], tiles, dim, range.first + i);
              ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                  << isa_name(isa) << ", dim " << dim << ", rows " << range.first << "+" << range.n
                  << ", query " << j << " of " << nq << ", row " << i << ": " << got << " vs "
                  << want;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace specdec
