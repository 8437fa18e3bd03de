// The AMX tile kernels (packed_dot_k_amx.cpp) against the VNNI ones they stand in for: the same
// bits for every output, whatever the number of activation rows (full and padded groups of 16),
// the threads, and the extreme codes and activations that reach the folded digits' bounds.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/kernel_types.h"
#include "tensor/matmul.h"
#include "tensor/packed_weights.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_dot.h"

namespace specdec {
namespace {

using testing::random_floats;

constexpr GgmlType kKQuants[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

struct AmxScope {
  explicit AmxScope(bool on) { set_amx_enabled(on); }
  ~AmxScope() { set_amx_enabled(true); }
};

// The tiles belong to the AVX-512 path: the tests run on it even where the suite is capped at
// AVX2 or scalar (SPECDEC_ISA, scripts/test.sh), restoring the choice when they end.
struct Avx512Scope {
  Avx512Scope() : saved(active_isa()) { set_active_isa(Isa::kAvx512Vnni); }
  ~Avx512Scope() { set_active_isa(saved); }
  Isa saved;
};

struct PackedMatrix {
  std::vector<uint8_t> bytes, packed;
  WeightMatrix w;
};

// extreme: every code at its largest (Q4_K/Q5_K 15/31 with scales and mins 63; Q6_K codes
// alternating 63 and 0 by block, scales 127 and -128), keeping the fp16 super-block scales.
PackedMatrix make_packed(GgmlType t, int64_t rows, int64_t cols, uint32_t seed, bool extreme) {
  PackedMatrix m;
  const std::vector<float> f = random_floats(static_cast<size_t>(rows * cols), seed);
  m.bytes = quantize_matrix(t, f.data(), rows, cols);
  if (extreme) {
    const size_t bs = traits(t).type_size;
    for (size_t blk = 0; blk < m.bytes.size() / bs; ++blk) {
      uint8_t* b = m.bytes.data() + blk * bs;
      if (t == GgmlType::Q6_K) {
        std::memset(b, blk % 2 ? 0x00 : 0xff, offsetof(BlockQ6_K, scales));
        for (int j = 0; j < 16; ++j) b[offsetof(BlockQ6_K, scales) + j] = j % 2 ? 0x80 : 0x7f;
      } else {
        std::memset(b + 4, 0xff, bs - 4);
      }
    }
  }
  m.w = WeightMatrix{t, rows, cols, m.bytes.data(), row_bytes(t, cols)};
  m.packed.resize(packed_bytes(m.w));
  pack_weights(m.w, m.packed.data());
  m.w.packed = m.packed.data();
  return m;
}

std::vector<float> activations(int64_t k, int64_t cols, uint32_t seed, bool extreme) {
  std::vector<float> x = random_floats(static_cast<size_t>(k * cols), seed);
  if (extreme) {  // quantized to +-127: alternating signs, all +1, all -1
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float alternating = c % 2 ? -1.0f : 1.0f;
        x[static_cast<size_t>(r * cols + c)] = r % 3 == 0 ? alternating : r % 3 == 1 ? 1.0f : -1.0f;
      }
    }
  }
  return x;
}

std::vector<float> run(const WeightMatrix& w, const std::vector<float>& x, int64_t k, bool amx,
                       ThreadPool& pool) {
  AmxScope scope(amx);
  std::vector<float> out(static_cast<size_t>(k * w.rows));
  matmul(w, x.data(), k, out.data(), pool);
  return out;
}

// Without AMX (or before the kernel grants it) no table names a tile kernel, so matmul cannot
// reach one; with it, the K-quants have theirs on the AVX-512 path only.
TEST(AmxTiles, OnlyWhereTheCpuRunsThem) {
  std::printf("AMX-INT8 tiles usable here: %s\n", cpu_has_amx_int8() ? "yes" : "no");
  for (GgmlType t : kKQuants) {
    EXPECT_EQ(dot_kernel(t, Isa::kAvx2).packed_tiles, nullptr) << type_name(t);
    EXPECT_EQ(dot_kernel(t, Isa::kScalar).packed_tiles, nullptr) << type_name(t);
    const bool has = dot_kernel(t, Isa::kAvx512Vnni).packed_tiles != nullptr;
    EXPECT_EQ(has, cpu_has_amx_int8()) << type_name(t);
  }
  if (!cpu_has_amx_int8()) {
    EXPECT_FALSE(amx_enabled());
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16}) {
    EXPECT_EQ(dot_kernel(t, Isa::kAvx512Vnni).packed_tiles, nullptr) << type_name(t);
  }
}

// 93 rows: 11 packed groups (two 32-row tile calls, one 16-row VNNI pair, one 8-row group)
// and 5 plain rows; 768 columns: three super-blocks; 32-96 activation rows (full and padded
// groups of 16), from where matmul runs Q4_K/Q5_K on tiles (Q6_K stays on VNNI: see
// KernelsBitwiseThePairKernels for its tile kernel).
TEST(AmxTiles, BitwiseTheVnniKernels) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "this CPU (or its kernel) runs no AMX-INT8 tiles";
  const Avx512Scope isa;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K}) {
    ASSERT_LE(dot_kernel(t, Isa::kAvx512Vnni).packed_tiles_min_rows, 32) << type_name(t);
  }
  ThreadPool one(1), two(2);
  for (GgmlType t : kKQuants) {
    for (bool extreme : {false, true}) {
      const PackedMatrix m = make_packed(t, 93, 768, 5, extreme);
      for (int64_t k : {32, 47, 64, 65, 79, 96}) {
        const std::vector<float> x = activations(k, 768, 6, extreme);
        const uint64_t calls = amx_tile_calls();
        const std::vector<float> vnni = run(m.w, x, k, false, one);
        EXPECT_EQ(amx_tile_calls(), calls) << "tiles ran with AMX off";
        const std::vector<float> tiles = run(m.w, x, k, true, two);
        // Two 32-row calls per pass (Q6_K stays on VNNI in matmul).
        const uint64_t want = t == GgmlType::Q6_K ? calls : calls + 2;
        EXPECT_EQ(amx_tile_calls(), want) << type_name(t) << " k " << k;
        ASSERT_EQ(std::memcmp(vnni.data(), tiles.data(), sizeof(float) * vnni.size()), 0)
            << type_name(t) << " k " << k << " extreme " << extreme;
      }
    }
  }
}

// The kernels themselves, called as matmul calls them, against the 16-row VNNI kernels on the
// same pair of groups: Q6_K's included, which matmul leaves on VNNI by default
// (packed_tiles_min_rows), so BitwiseTheVnniKernels alone would not reach it.
TEST(AmxTiles, KernelsBitwiseThePairKernels) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "this CPU (or its kernel) runs no AMX-INT8 tiles";
  constexpr int64_t kCols = 512;
  for (GgmlType t : kKQuants) {
    const DotKernel& kern = dot_kernel(t, Isa::kAvx512Vnni);
    ASSERT_NE(kern.packed_tiles, nullptr) << type_name(t);
    for (bool extreme : {false, true}) {
      const PackedMatrix m = make_packed(t, kTileWeightRows, kCols, 21, extreme);
      for (int64_t k : {1, 9, 16, 21, 48}) {
        const std::vector<float> x = activations(k, kCols, 22, extreme);
        const size_t qstride = row_bytes(kern.act_type, kCols);
        const size_t wstride = widened_row_bytes(kern.act_type, kCols);
        std::vector<uint8_t> q(qstride), wide(wstride * static_cast<size_t>(k));
        for (int64_t r = 0; r < k; ++r) {
          kern.quantize(x.data() + r * kCols, q.data(), kCols);
          widen_activation_row(kern.act_type, q.data(), wide.data() + r * wstride, kCols);
        }
        std::vector<uint8_t> tiled(tiled_activation_bytes(k, kCols));
        tile_activation_rows(wide.data(), wstride, k, kCols, tiled.data());
        std::vector<float> pair(static_cast<size_t>(kTileWeightRows * k));
        std::vector<float> tiles(pair.size(), -1.0f);
        const size_t pair_bytes = m.packed.size() / 2;  // two 16-row pairs
        for (int p = 0; p < 2; ++p) {
          kern.packed16(kCols, m.packed.data() + p * pair_bytes, wide.data(), wstride, k,
                        pair.data() + 16 * p, kTileWeightRows);
        }
        kern.packed_tiles(kCols, m.packed.data(), wide.data(), wstride, tiled.data(), k,
                          tiles.data(), kTileWeightRows);
        ASSERT_EQ(std::memcmp(pair.data(), tiles.data(), sizeof(float) * pair.size()), 0)
            << type_name(t) << " k " << k << " extreme " << extreme;
      }
    }
  }
}

// A row's output does not depend on the other rows of its tile: row r of a 70-row pass (tiles,
// the last group padded) equals the same row in a 64-row pass (tiles) and in the one-row (VNNI)
// pass.
TEST(AmxTiles, RowsIndependentOfTheirTile) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "this CPU (or its kernel) runs no AMX-INT8 tiles";
  const Avx512Scope isa;
  ThreadPool pool(2);
  for (GgmlType t : kKQuants) {
    const PackedMatrix m = make_packed(t, 32, 512, 9, false);
    const std::vector<float> x = activations(70, 512, 10, false);
    const std::vector<float> all = run(m.w, x, 70, true, pool);
    for (int64_t r : {0, 15, 16, 69}) {
      const std::vector<float> one(x.begin() + r * 512, x.begin() + (r + 1) * 512);
      const std::vector<float> alone = run(m.w, one, 1, true, pool);
      ASSERT_EQ(std::memcmp(alone.data(), all.data() + r * 32, sizeof(float) * 32), 0)
          << type_name(t) << " row " << r;
    }
    const std::vector<float> first64(x.begin(), x.begin() + 64 * 512);
    const std::vector<float> part = run(m.w, first64, 64, true, pool);
    ASSERT_EQ(std::memcmp(part.data(), all.data(), sizeof(float) * part.size()), 0) << type_name(t);
  }
}

}  // namespace
}  // namespace specdec
