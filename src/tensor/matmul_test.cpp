#include "tensor/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
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
        const int64_t rows = 37, cols = 512, kmax = 9;
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
    for (int64_t cols : {32, 96, 576}) {
      for (int64_t k : {1, 5, 7, 9, 13}) {
        const int64_t rows = 24;
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

// Q8_0 weights of -128 (never produced by quantizing, but legal in a file) and extreme
// activations (alternating signs, all +1, all -1: quantized to +-127, so every chunk's products
// reach the int16 bounds of the packed kinds): the sign and offset handling and those bounds
// must still hold.
TEST(Matmul, PackedExtremeValues) {
  ThreadPool pool(1);
  const int64_t rows = 8, cols = 64;
  for (GgmlType t : kWeightTypes) {
    if (!packable(t)) continue;
    for (Isa isa : paths()) {
      IsaScope scope(isa);
      Matrix m = make_weights(t, rows, cols, 3);
      // All-ones payload bytes: Q8_0 -> -1, 4-bit -> 15, Q5_0 high bits set -> 31; then Q8_0's
      // first value of every block set to -128.
      const size_t bs = traits(t).type_size;
      const size_t hdr = t == GgmlType::Q4_1 ? 4 : 2;
      for (size_t blk = 0; blk < m.bytes.size() / bs; ++blk) {
        std::memset(m.bytes.data() + blk * bs + hdr, 0xff, bs - hdr);
        if (t == GgmlType::Q8_0) m.bytes[blk * bs + 2] = 0x80;
      }
      const int64_t k = 3;
      std::vector<float> x(static_cast<size_t>(k * cols));
      for (int64_t c = 0; c < cols; ++c) {
        x[static_cast<size_t>(c)] = c % 2 ? -1.0f : 1.0f;
        x[static_cast<size_t>(cols + c)] = 1.0f;
        x[static_cast<size_t>(2 * cols + c)] = -1.0f;
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
        EXPECT_NEAR(packed[i], ref[i], 2e-6 * abs_sum[i] + 1e-6) << type_name(t) << " " << i;
        EXPECT_NEAR(plain[i], ref[i], 2e-6 * abs_sum[i] + 1e-6) << type_name(t) << " " << i;
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
  EXPECT_ANY_THROW(widen_activation_row(GgmlType::Q8_K, buf.data(), buf.data() + 512, 256));
}

TEST(Matmul, PackedBytesOnlyForPackableShapes) {
  std::vector<uint8_t> bytes(100000);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q4_1, 7, 64, bytes.data(), 40}), 0u);
  EXPECT_EQ(packed_bytes(WeightMatrix{GgmlType::Q4_K, 16, 256, bytes.data(), 144}), 0u);
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
