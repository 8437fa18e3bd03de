#include "tensor/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "support/random_floats.h"
#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"
#include "tensor/dequant.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"
#include "tensor/quantize.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_dot.h"

namespace specdec {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

using testing::random_floats;

// Restores the process-wide ISA choice when a test ends.
struct IsaScope {
  explicit IsaScope(Isa isa) : saved(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved); }
  Isa saved;
};

// Every path this CPU can run (the tests of a path the CPU lacks cannot run here; the test
// log names the paths that ran, see AvailablePaths).
std::vector<Isa> paths() {
  std::vector<Isa> p;
  for (Isa isa : kAllIsas) {
    if (cpu_supports(isa)) p.push_back(isa);
  }
  return p;
}

TEST(Matmul, AvailablePaths) {
  std::string names;
  for (Isa isa : paths()) names += std::string(isa_name(isa)) + " ";
  std::printf("kernel paths tested on this CPU: %s(default %s)\n", names.c_str(),
              std::string(isa_name(default_isa())).c_str());
  EXPECT_EQ(paths().front(), Isa::kScalar);
  // Asking for a path the CPU lacks gives the best one it has, never one it cannot run.
  IsaScope s(Isa::kAvx512Vnni);
  EXPECT_EQ(active_isa(), paths().back());
}

struct Matrix {
  std::vector<uint8_t> bytes, packed;
  WeightMatrix w;
};

// pack: also build the row-interleaved copy where the type and shape allow one.
Matrix make_weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed, bool pack = false) {
  Matrix m;
  const std::vector<float> f = random_floats(static_cast<size_t>(rows * cols), seed);
  m.bytes = quantize_matrix(t, f.data(), rows, cols);
  m.w = WeightMatrix{t, rows, cols, m.bytes.data(), row_bytes(t, cols)};
  if (pack && packed_bytes(m.w) > 0) {
    m.packed.resize(packed_bytes(m.w));
    pack_weights(m.w, m.packed.data());
    m.w.packed = m.packed.data();
  }
  return m;
}

// Plain and (for the packable types) packed variants of the same matrix.
std::vector<bool> layouts(GgmlType t) {
  return packable(t) ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

// Reference: double-precision dot of the dequantized weights with the activations as the
// kernel sees them (quantized to the activation format, then dequantized).
void reference(const WeightMatrix& w, const float* x, int64_t k, std::vector<double>* out,
               std::vector<double>* abs_sum) {
  const DotKernel& kern = dot_kernel(w.type, Isa::kScalar);
  std::vector<float> wr(static_cast<size_t>(w.cols)), xr(static_cast<size_t>(w.cols));
  std::vector<uint8_t> xq(row_bytes(kern.act_type, w.cols) + 4);
  out->assign(static_cast<size_t>(k * w.rows), 0.0);
  abs_sum->assign(out->size(), 0.0);
  for (int64_t t = 0; t < k; ++t) {
    if (kern.quantize) {
      kern.quantize(x + t * w.cols, xq.data(), w.cols);
      dequantize_row(kern.act_type, xq.data(), xr.data(), w.cols);
    } else {
      std::memcpy(xr.data(), x + t * w.cols, sizeof(float) * static_cast<size_t>(w.cols));
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      dequantize_row(w, r, wr.data());
      double s = 0, a = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        s += static_cast<double>(wr[c]) * xr[c];
        a += std::fabs(static_cast<double>(wr[c]) * xr[c]);
      }
      (*out)[static_cast<size_t>(t * w.rows + r)] = s;
      // Q8_1 carries d * sum(q) rounded to fp16 in `s`; the kernels use it for the weight-min
      // term (as llama.cpp does), which adds up to |m * s| * 2^-10 per block (s and d are each
      // rounded once).
      if (kern.act_type == GgmlType::Q8_1) {
        const uint8_t* wrow = w.data + static_cast<size_t>(r) * w.row_stride;
        const size_t wbs = traits(w.type).type_size;
        for (int64_t b = 0; b < w.cols / 32; ++b) {
          uint16_t m, sx;
          std::memcpy(&m, wrow + b * wbs + 2, 2);
          std::memcpy(&sx, xq.data() + b * 36 + 2, 2);
          a += std::fabs(static_cast<double>(fp16_to_fp32(m)) * fp16_to_fp32(sx)) * 0x1p-10 / 2e-6;
        }
      }
      (*abs_sum)[static_cast<size_t>(t * w.rows + r)] = a;
    }
  }
}

TEST(Matmul, MatchesDoublePrecisionReference) {
  ThreadPool pool(2);
  for (Isa isa : paths()) {
    IsaScope scope(isa);
    for (GgmlType t : kWeightTypes) {
      const int64_t bs = std::max<int64_t>(traits(t).block_size, 1);
      const std::vector<int64_t> col_choices =
          bs == 1 ? std::vector<int64_t>{1, 3, 8, 33, 100, 160}
                  : std::vector<int64_t>{bs, 2 * bs, 3 * bs, 4 * bs, 5 * bs};
      for (int64_t rows : {1, 3, 17, 100}) {
        for (int64_t cols : col_choices) {
          for (bool pack : layouts(t)) {
            const int64_t k = 1 + (rows + cols) % 9;
            const Matrix m =
                make_weights(t, rows, cols, static_cast<uint32_t>(rows * 31 + cols), pack);
            const std::vector<float> x = random_floats(static_cast<size_t>(k * cols), 99);
            std::vector<float> out(static_cast<size_t>(k * rows));
            matmul(m.w, x.data(), k, out.data(), pool);
            std::vector<double> ref, abs_sum;
            reference(m.w, x.data(), k, &ref, &abs_sum);
            for (size_t i = 0; i < out.size(); ++i) {
              // Float accumulation: a few ulps of the sum of |terms| per block plus one rounding.
              ASSERT_NEAR(out[i], ref[i], 2e-6 * abs_sum[i] + 1e-6)
                  << type_name(t) << " isa " << static_cast<int>(isa) << " rows " << rows
                  << " cols " << cols << " k " << k << " i " << i << " packed " << pack;
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, ScalarAndAvx2Agree) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2";
  ThreadPool pool(1);
  for (GgmlType t : kWeightTypes) {
    const int64_t cols = 1024;
    const Matrix m = make_weights(t, 9, cols, 5);
    const std::vector<float> x = random_floats(3 * cols, 6);
    std::vector<float> a(27), b(27);
    {
      IsaScope s(Isa::kScalar);
      matmul(m.w, x.data(), 3, a.data(), pool);
    }
    {
      IsaScope s(Isa::kAvx2);
      matmul(m.w, x.data(), 3, b.data(), pool);
    }
    std::vector<double> ref, abs_sum;
    reference(m.w, x.data(), 3, &ref, &abs_sum);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], 4e-6 * abs_sum[i] + 1e-6) << type_name(t) << " " << i;
    }
  }
}

// out[t][r] must be bitwise the same for any k and any thread count.
TEST(Matmul, BatchInvariant) {
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3), ThreadPool(4)};
  for (Isa isa : paths()) {
    IsaScope scope(isa);
    for (GgmlType t : kWeightTypes) {
      for (bool pack : layouts(t)) {
        // k up to 17: the 16-row K-quant kernels take up to 16 activation rows in one group,
        // 17 in two (packed_dot_k16_avx512.cpp).
        const int64_t rows = 37, cols = 512, kmax = 17;
        const Matrix m = make_weights(t, rows, cols, 17, pack);
        const std::vector<float> x = random_floats(static_cast<size_t>(kmax * cols), 18);
        std::vector<float> single(static_cast<size_t>(kmax * rows));
        for (int64_t t0 = 0; t0 < kmax; ++t0) {
          matmul(m.w, x.data() + t0 * cols, 1, single.data() + t0 * rows, pools[0]);
        }
        for (ThreadPool& pool : pools) {
          for (int64_t k = 1; k <= kmax; ++k) {
            for (int64_t start = 0; start + k <= kmax; start += 4) {
              std::vector<float> out(static_cast<size_t>(k * rows), -1.0f);
              matmul(m.w, x.data() + start * cols, k, out.data(), pool);
              ASSERT_EQ(
                  std::memcmp(out.data(), single.data() + start * rows, sizeof(float) * out.size()),
                  0)
                  << type_name(t) << " isa " << static_cast<int>(isa) << " k " << k << " threads "
                  << pool.size() << " start " << start << " packed " << pack;
            }
          }
        }
      }
    }
  }
}

// A group is bitwise the same as its matmuls done one by one, for any k and thread count, with
// chunks that straddle matrices of different heights.
TEST(Matmul, GroupEqualsSeparateMatmuls) {
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  for (Isa isa : paths()) {
    IsaScope scope(isa);
    for (GgmlType t : kWeightTypes) {
      for (bool pack : layouts(t)) {
        const int64_t cols = 256, kmax = 6;
        const Matrix a = make_weights(t, 37, cols, 21, pack),
                     b = make_weights(t, 5, cols, 22, pack),
                     c = make_weights(t, 70, cols, 23, pack);
        const std::vector<float> x = random_floats(static_cast<size_t>(kmax * cols), 24);
        for (ThreadPool& pool : pools) {
          for (int64_t k : {int64_t{1}, int64_t{2}, kmax}) {
            std::vector<float> ea(static_cast<size_t>(k * 37)), eb(static_cast<size_t>(k * 5)),
                ec(static_cast<size_t>(k * 70));
            matmul(a.w, x.data(), k, ea.data(), pools[0]);
            matmul(b.w, x.data(), k, eb.data(), pools[0]);
            matmul(c.w, x.data(), k, ec.data(), pools[0]);
            std::vector<float> ga(ea.size(), -1.0f), gb(eb.size(), -1.0f), gc(ec.size(), -1.0f);
            const MatmulTarget targets[] = {
                {&a.w, ga.data()}, {&b.w, gb.data()}, {&c.w, gc.data()}};
            matmul_group(targets, x.data(), k, pool);
            const auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
              return std::memcmp(u.data(), v.data(), sizeof(float) * u.size()) == 0;
            };
            ASSERT_TRUE(same(ga, ea) && same(gb, eb) && same(gc, ec))
                << type_name(t) << " isa " << static_cast<int>(isa) << " k " << k << " threads "
                << pool.size() << " packed " << pack;
          }
        }
      }
    }
  }
}

// The packed kernels mirror their scalar reference operation for operation, so every path
// gives the same bits (unlike the plain kernels, whose float summation orders differ between
// scalar and SIMD).
TEST(Matmul, PackedPathsBitwise) {
  ThreadPool pool(2);
  for (GgmlType t : kWeightTypes) {
    if (!packable(t)) continue;
    const bool k_quant = traits(t).block_size == kQK_K;
    for (int64_t cols :
         k_quant ? std::vector<int64_t>{256, 768, 1536} : std::vector<int64_t>{32, 96, 576}) {
      for (int64_t k : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17}) {
        // 16 rows: one pair of groups (the AVX-512 kernels' 16-row form in one call);
        // 24: a pair and a single group, or single groups where the threads split them.
        const int64_t rows = k % 2 == 0 ? 16 : 24;
        const Matrix m = make_weights(t, rows, cols, static_cast<uint32_t>(cols), true);
        const std::vector<float> x = random_floats(static_cast<size_t>(k * cols), 7);
        std::vector<float> a(static_cast<size_t>(k * rows)), b(a.size());
        {
          IsaScope s(Isa::kScalar);
          matmul(m.w, x.data(), k, a.data(), pool);
        }
        for (Isa isa : paths()) {
          IsaScope s(isa);
          matmul(m.w, x.data(), k, b.data(), pool);
          ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0)
              << type_name(t) << " cols " << cols << " k " << k << " " << isa_name(isa);
        }
      }
    }
  }
}

// The 16-row kernels (K-quants and the 32-column formats) are what a pass over two adjacent
// groups runs on AVX-512 VNNI; their outputs must be the 8-row kernels' bits (checked through
// PackedPathsBitwise and BatchInvariant, which would not notice if the path were never taken).
TEST(Matmul, Avx512PackedTypesHaveTheSixteenRowKernels) {
  if (!cpu_supports(Isa::kAvx512Vnni)) {
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI; its kernels cannot run here";
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    EXPECT_NE(dot_kernel(t, Isa::kAvx512Vnni).packed16, nullptr) << type_name(t);
    EXPECT_EQ(dot_kernel(t, Isa::kAvx2).packed16, nullptr) << type_name(t);
    // PackedPathsBitwise's largest k (13) must reach the 16-row form, and BatchInvariant's (9)
    // for the 32-column formats, whose thresholds are lower.
    EXPECT_LE(dot_kernel(t, Isa::kAvx512Vnni).packed16_min_rows, 13) << type_name(t);
    if (traits(t).block_size == kQK) {
      EXPECT_LE(dot_kernel(t, Isa::kAvx512Vnni).packed16_min_rows, 9) << type_name(t);
    }
  }
}

// The AVX-512 VNNI kernels compute the AVX2 kernels' integer sums with other instructions and
// share their float code, so the two give the same bits for every integer type, packed or not.
// (The float formats' 512-bit kernels sum in another order; MatchesDoublePrecisionReference
// and BatchInvariant cover them.)
TEST(Matmul, Avx512VnniAndAvx2Bitwise) {
  if (!cpu_supports(Isa::kAvx512Vnni)) {
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI; its kernels cannot run here";
  }
  ThreadPool pool(2);
  for (GgmlType t : kWeightTypes) {
    if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) continue;
    for (bool pack : layouts(t)) {
      for (int64_t k : {1, 2, 4, 5, 8, 9}) {
        // 37 rows: packed groups of 8 and 5 plain rows; 512 columns: two K-quant super-blocks.
        const int64_t rows = 37, cols = 512;
        const Matrix m = make_weights(t, rows, cols, 31, pack);
        const std::vector<float> x = random_floats(static_cast<size_t>(k * cols), 32);
        std::vector<float> a(static_cast<size_t>(k * rows)), b(a.size());
        {
          IsaScope s(Isa::kAvx2);
          matmul(m.w, x.data(), k, a.data(), pool);
        }
        {
          IsaScope s(Isa::kAvx512Vnni);
          matmul(m.w, x.data(), k, b.data(), pool);
        }
        ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0)
            << type_name(t) << " k " << k << " packed " << pack;
      }
    }
  }
}

// Sets every block of a quantized matrix to extreme codes, keeping its fp16 scales: all-ones
// payload bytes (Q8_0 -> -1, 4-bit -> 15, 5-bit -> 31, Q4_K/Q5_K scales and mins -> 63), Q8_0's
// first value of every block -128 (never produced by quantizing, but legal in a file); Q6_K
// codes alternate between 63 and 0 (q - 32 = 31, -32) from block to block, its scales between
// 127 and -128.
void set_extreme_codes(GgmlType t, std::vector<uint8_t>& bytes) {
  const size_t bs = traits(t).type_size;
  for (size_t blk = 0; blk < bytes.size() / bs; ++blk) {
    uint8_t* b = bytes.data() + blk * bs;
    if (t == GgmlType::Q6_K) {
      std::memset(b, blk % 2 ? 0x00 : 0xff, offsetof(BlockQ6_K, scales));
      for (int j = 0; j < 16; ++j) b[offsetof(BlockQ6_K, scales) + j] = j % 2 ? 0x80 : 0x7f;
      continue;
    }
    const size_t hdr = t == GgmlType::Q4_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ? 4 : 2;
    std::memset(b + hdr, 0xff, bs - hdr);
    if (t == GgmlType::Q8_0) b[2] = 0x80;
  }
}

// Extreme weights (set_extreme_codes) and extreme activations (alternating signs, all +1, all
// -1: quantized to +-127, so every chunk's products reach the int16 bounds of the packed
// kinds, and the 16-row Q4_K kernel's half sub-block sums their int16 bound): the sign and
// offset handling and those bounds must still hold. 8 rows run the 8-row kernels; 16 rows over
// 10 and 16 activation rows the AVX-512 16-row ones (every type's threshold is at most 10; 16
// is the K-quant kernels' largest group).
TEST(Matmul, PackedExtremeValues) {
  ThreadPool pool(1);
  for (const auto& [rows, k] : {std::pair<int64_t, int64_t>{8, 3}, {16, 10}, {16, 16}}) {
    for (GgmlType t : kWeightTypes) {
      if (!packable(t)) continue;
      const int64_t cols = traits(t).block_size == kQK_K ? 512 : 64;
      for (Isa isa : paths()) {
        IsaScope scope(isa);
        Matrix m = make_weights(t, rows, cols, 3);
        set_extreme_codes(t, m.bytes);
        std::vector<float> x(static_cast<size_t>(k * cols));
        for (int64_t r = 0; r < k; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const float alternating = c % 2 ? -1.0f : 1.0f;
            x[static_cast<size_t>(r * cols + c)] = r % 3 == 0   ? alternating
                                                   : r % 3 == 1 ? 1.0f
                                                                : -1.0f;
          }
        }
        x[0] = -1.0f;
        std::vector<float> plain(static_cast<size_t>(k * rows)), packed(plain.size());
        matmul(m.w, x.data(), k, plain.data(), pool);
        m.packed.resize(packed_bytes(m.w));
        pack_weights(m.w, m.packed.data());
        m.w.packed = m.packed.data();
        matmul(m.w, x.data(), k, packed.data(), pool);
        std::vector<double> ref, abs_sum;
        reference(m.w, x.data(), k, &ref, &abs_sum);
        for (size_t i = 0; i < plain.size(); ++i) {
          EXPECT_NEAR(packed[i], ref[i], 2e-6 * abs_sum[i] + 1e-6)
              << type_name(t) << " rows " << rows << " " << i;
          EXPECT_NEAR(plain[i], ref[i], 2e-6 * abs_sum[i] + 1e-6)
              << type_name(t) << " rows " << rows << " " << i;
        }
      }
    }
  }
}

// The packed kernels' activation format keeps the quantized values and their sum, and widens
// the fp16 scale (and Q8_1's sum) exactly, on every path (the SIMD one converts with F16C and
// sums with vector instructions). Row 2 holds extreme values (all quants +-127).
TEST(Matmul, WidenedActivationsKeepValuesAndScales) {
  std::vector<float> x = random_floats(3 * 64, 41);
  for (int c = 0; c < 64; ++c) x[static_cast<size_t>(128 + c)] = c % 3 == 0 ? -5.0f : 5.0f;
  for (GgmlType act : {GgmlType::Q8_0, GgmlType::Q8_1}) {
    const size_t bs = act == GgmlType::Q8_0 ? 34 : 36, hdr = act == GgmlType::Q8_0 ? 2 : 4;
    for (int row = 0; row < 3; ++row) {
      std::vector<uint8_t> q(row_bytes(act, 64)), wide(2 * sizeof(PackedActBlock));
      (act == GgmlType::Q8_0 ? quantize_act_q8_0_scalar : quantize_act_q8_1_scalar)(
          x.data() + 64 * row, q.data(), 64);
      for (Isa isa : paths()) {
        IsaScope scope(isa);
        std::fill(wide.begin(), wide.end(), uint8_t{0xee});
        widen_activation_row(act, q.data(), wide.data(), 64);
        for (size_t b = 0; b < 2; ++b) {
          PackedActBlock w;
          std::memcpy(&w, wide.data() + b * sizeof w, sizeof w);
          uint16_t d, sx = 0;
          std::memcpy(&d, q.data() + b * bs, 2);
          if (act == GgmlType::Q8_1) std::memcpy(&sx, q.data() + b * bs + 2, 2);
          EXPECT_EQ(w.d, fp16_to_fp32(d)) << isa_name(isa);
          EXPECT_EQ(w.s, act == GgmlType::Q8_1 ? fp16_to_fp32(sx) : 0.0f) << isa_name(isa);
          EXPECT_EQ(std::memcmp(w.qs, q.data() + b * bs + hdr, 32), 0) << isa_name(isa);
          int32_t sum = 0;
          for (size_t j = 0; j < 32; ++j) sum += static_cast<int8_t>(q[b * bs + hdr + j]);
          EXPECT_EQ(w.sum, sum) << isa_name(isa) << " row " << row;
        }
      }
    }
  }
  std::vector<uint8_t> buf(1024);
  EXPECT_ANY_THROW(widen_activation_row(GgmlType::F16, buf.data(), buf.data() + 512, 32));
}

// Q8_K rows widen to a copy of d, qs and bsums plus the 32-element sums, on every path.
TEST(Matmul, WidenedQ8KActivationsKeepValuesAndSums) {
  std::vector<float> x = random_floats(2 * 512, 43);
  for (int c = 0; c < 256; ++c) x[static_cast<size_t>(512 + c)] = c % 3 == 0 ? -5.0f : 5.0f;
  for (int row = 0; row < 2; ++row) {
    std::vector<uint8_t> q(row_bytes(GgmlType::Q8_K, 512));
    quantize_act_q8_k_scalar(x.data() + 512 * row, q.data(), 512);
    ASSERT_EQ(widened_row_bytes(GgmlType::Q8_K, 512), 2 * sizeof(PackedActBlockK));
    for (Isa isa : paths()) {
      IsaScope scope(isa);
      std::vector<uint8_t> wide(widened_row_bytes(GgmlType::Q8_K, 512), 0xee);
      widen_activation_row(GgmlType::Q8_K, q.data(), wide.data(), 512);
      for (size_t b = 0; b < 2; ++b) {
        BlockQ8_K in;
        PackedActBlockK w;
        std::memcpy(&in, q.data() + b * sizeof in, sizeof in);
        std::memcpy(&w, wide.data() + b * sizeof w, sizeof w);
        EXPECT_EQ(w.d, in.d);
        EXPECT_EQ(std::memcmp(w.qs, in.qs, sizeof w.qs), 0);
        EXPECT_EQ(std::memcmp(w.bsums, in.bsums, sizeof w.bsums), 0);
        for (int j = 0; j < 8; ++j) {
          int sum = 0;
          for (int c = 0; c < 32; ++c) sum += in.qs[32 * j + c];
          EXPECT_EQ(w.bsums32[j], sum) << isa_name(isa) << " row " << row << " j " << j;
        }
      }
    }
  }
}

// BlockQ4_K's 6-bit packing of 8 scales and 8 mins (each < 64) into 12 bytes.
void put_k_scales(uint8_t* s, const int sc[8], const int m[8]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Hand-built K-quant rows whose products are worked out below, through the packed kernels on
// every path, against all-equal activations: x = a (a = 1, 2, 3 for activation rows t = 0, 1, 2)
// quantizes to q = -127 with d = -a / 127, so y = a up to d's rounding, and each output is a sum
// of the 256 weights of its row times a. One super-block, 8 rows, d = dmin = 1:
//   Q4_K row r: q = r, sc[j] = 8j + 7, m[j] = 9j: w = (8j + 7) r - 9j per sub-block j of 32,
//               sum = 32 * sum_j ((8j + 7) r - 9j) = 32 (280 r - 252) = 8960 r - 8064;
//   Q5_K row r: q = 16 + r (the fifth bit set): sum = 32 (280 (16 + r) - 252) = 8960 r + 135296;
//   Q6_K row r: q - 32 = r - 4, sc[s] = 16s - 128 (s < 16, -128 .. 112): sum = 16 (r - 4) *
//               sum_s (16s - 128) = 16 (r - 4) (-128) = -2048 (r - 4).
// The kernels compute d * d_x * sumi - dmin * d_x * summ in float, and d_x = -a / 127 is
// rounded to float, so the check allows a few ulps of the larger term (|d_x * sumi| < 2.1e5 a).
TEST(Matmul, PackedKQuantsHandCheckedValues) {
  ThreadPool pool(2);
  const int64_t rows = 8, cols = 256, k = 3;
  std::vector<float> x(static_cast<size_t>(k * cols));
  for (int64_t t = 0; t < k; ++t) {
    std::fill(x.begin() + t * cols, x.begin() + (t + 1) * cols, static_cast<float>(t + 1));
  }
  const uint16_t one = fp32_to_fp16(1.0f);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    Matrix m;
    m.bytes.assign(static_cast<size_t>(rows) * row_bytes(t, cols), 0);
    std::vector<double> expect(rows);
    for (int r = 0; r < rows; ++r) {
      uint8_t* row = m.bytes.data() + static_cast<size_t>(r) * row_bytes(t, cols);
      if (t == GgmlType::Q6_K) {
        BlockQ6_K b{};
        const int q = 32 + r - 4;
        for (int e = 0; e < 256; ++e) {  // the layout of quant_blocks.h, element by element
          const int h = e / 128, l = e % 32, i = (e % 128) / 32;
          b.ql[64 * h + l + 32 * (i & 1)] |= static_cast<uint8_t>((q & 15) << (i >= 2 ? 4 : 0));
          b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * i));
        }
        for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(16 * s - 128);
        b.d = one;
        std::memcpy(row, &b, sizeof b);
        expect[static_cast<size_t>(r)] = -2048.0 * (r - 4);
        continue;
      }
      int sc[8], mn[8];
      for (int j = 0; j < 8; ++j) sc[j] = 8 * j + 7, mn[j] = 9 * j;
      const bool five = t == GgmlType::Q5_K;
      const int q = five ? 16 + r : r;
      uint8_t* qs;
      if (five) {
        BlockQ5_K b{};
        b.d = b.dmin = one;
        put_k_scales(b.scales, sc, mn);
        std::memset(b.qh, 0xff, sizeof b.qh);
        std::memcpy(row, &b, sizeof b);
        qs = row + offsetof(BlockQ5_K, qs);
      } else {
        BlockQ4_K b{};
        b.d = b.dmin = one;
        put_k_scales(b.scales, sc, mn);
        std::memcpy(row, &b, sizeof b);
        qs = row + offsetof(BlockQ4_K, qs);
      }
      std::memset(qs, (q & 15) * 0x11, 128);
      expect[static_cast<size_t>(r)] = five ? 8960.0 * r + 135296.0 : 8960.0 * r - 8064.0;
    }
    m.w = WeightMatrix{t, rows, cols, m.bytes.data(), row_bytes(t, cols)};
    m.packed.resize(packed_bytes(m.w));
    pack_weights(m.w, m.packed.data());
    m.w.packed = m.packed.data();
    for (Isa isa : paths()) {
      IsaScope scope(isa);
      std::vector<float> out(static_cast<size_t>(k * rows));
      matmul(m.w, x.data(), k, out.data(), pool);
      for (int64_t a = 0; a < k; ++a) {
        for (int r = 0; r < rows; ++r) {
          const double want = expect[static_cast<size_t>(r)] * static_cast<double>(a + 1);
          EXPECT_NEAR(out[static_cast<size_t>(a * rows + r)], want, 0.1 * (a + 1))
              << type_name(t) << " " << isa_name(isa) << " row " << r << " x = " << a + 1;
        }
      }
    }
  }
}

TEST(Matmul, PackedBytesOnlyForPackableShapes) {
  std::vector<uint8_t> bytes(100000);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q4_1, 7, 64, bytes.data(), 40}), 0u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q4_K, 17, 256, bytes.data(), 144}), 16u * 144u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q6_K, 7, 256, bytes.data(), 210}), 0u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q5_K, 8, 512, bytes.data(), 352}), 8u * 352u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q5_1, 16, 64, bytes.data(), 48}), 0u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q4_1, 17, 64, bytes.data(), 40}), 16u * 40u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q8_0, 8, 32, bytes.data(), 34}), 8u * 34u);
  EXPECT_ANY_THROW(
      pack_weights(WeightMatrix{GgmlType::F16, 8, 32, bytes.data(), 64}, bytes.data()));
}

TEST(Matmul, GroupRejectsMixedShapes) {
  ThreadPool pool(1);
  const Matrix a = make_weights(GgmlType::Q8_0, 4, 64, 1),
               b = make_weights(GgmlType::Q8_0, 4, 96, 2),
               c = make_weights(GgmlType::Q4_0, 4, 64, 3);
  std::vector<float> x(96), o1(4), o2(4);
  const MatmulTarget ab[] = {{&a.w, o1.data()}, {&b.w, o2.data()}};
  EXPECT_ANY_THROW(matmul_group(ab, x.data(), 1, pool));
  const MatmulTarget ac[] = {{&a.w, o1.data()}, {&c.w, o2.data()}};
  EXPECT_ANY_THROW(matmul_group(ac, x.data(), 1, pool));
}

TEST(Matmul, DequantizeRowOfMatrix) {
  const Matrix m = make_weights(GgmlType::Q6_K, 4, 512, 3);
  std::vector<float> a(512), b(512);
  dequantize_row(m.w, 2, a.data());
  dequantize_row(GgmlType::Q6_K, m.bytes.data() + 2 * m.w.row_stride, b.data(), 512);
  EXPECT_EQ(a, b);
  EXPECT_ANY_THROW(dequantize_row(m.w, 4, a.data()));
}

TEST(Matmul, RejectsBadShapesAndTypes) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(1024);
  std::vector<float> x(64), out(4);
  WeightMatrix w{GgmlType::Q4_0, 1, 40, bytes.data(), 18};
  EXPECT_ANY_THROW(matmul(w, x.data(), 1, out.data(), pool));
  w = WeightMatrix{GgmlType::Q2_K, 1, 256, bytes.data(), 84};
  EXPECT_ANY_THROW(matmul(w, x.data(), 1, out.data(), pool));
}

}  // namespace
}  // namespace specdec
