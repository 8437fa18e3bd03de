#include "tensor/vec_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

// Bitwise equality; empty vectors compare equal without handing memcmp a null pointer.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

using testing::random_floats;

// Every length from 0 to past two vector widths (tails of every size), against a double sum.
TEST(VecOps, DotMatchesDoubleReferenceOnAllPathsAndTails) {
  for (int64_t n = 0; n <= 41; ++n) {
    const std::vector<float> a = random_floats(static_cast<size_t>(n), 1),
                             b = random_floats(static_cast<size_t>(n), 2);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
      mag += std::fabs(static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)]);
    }
    EXPECT_NEAR(dot_f32_scalar(a.data(), b.data(), n), ref, 1e-6 * mag + 1e-7) << n;
    if (cpu_has_avx2()) {
      EXPECT_NEAR(dot_f32_avx2(a.data(), b.data(), n), ref, 1e-6 * mag + 1e-7) << n;
    }
    EXPECT_NEAR(dot_f32(a.data(), b.data(), n), ref, 1e-6 * mag + 1e-7) << n;
  }
}

TEST(VecOps, AxpyMatchesScalarOnAllPathsAndTails) {
  for (int64_t n = 0; n <= 41; ++n) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n), 3),
                             y0 = random_floats(static_cast<size_t>(n), 4);
    std::vector<float> ys = y0, yv = y0, yd = y0;
    axpy_f32_scalar(0.37f, x.data(), ys.data(), n);
    axpy_f32(0.37f, x.data(), yd.data(), n);
    if (cpu_has_avx2()) axpy_f32_avx2(0.37f, x.data(), yv.data(), n);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const double ref = static_cast<double>(y0[i]) + 0.37 * static_cast<double>(x[i]);
      EXPECT_NEAR(ys[i], ref, 1e-6 * (std::fabs(ref) + 1)) << n;
      EXPECT_NEAR(yd[i], ref, 1e-6 * (std::fabs(ref) + 1)) << n;
      if (cpu_has_avx2()) {
        EXPECT_NEAR(yv[i], ref, 1e-6 * (std::fabs(ref) + 1)) << n;
      }
    }
  }
}

// The AVX2 versions mirror the scalar ones operation for operation: identical bits, so the
// attention of a deep model rounds the same on every path.
TEST(VecOps, Avx2IsBitwiseTheScalarResult) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2";
  for (int64_t n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
    const std::vector<float> a = random_floats(static_cast<size_t>(n), 11),
                             b = random_floats(static_cast<size_t>(n), 12);
    const float s = dot_f32_scalar(a.data(), b.data(), n), v = dot_f32_avx2(a.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(&s, &v, sizeof s), 0) << n << ": " << s << " vs " << v;
    std::vector<float> ys = b, yv = b;
    axpy_f32_scalar(-1.7f, a.data(), ys.data(), n);
    axpy_f32_avx2(-1.7f, a.data(), yv.data(), n);
    EXPECT_TRUE(same_bits(ys, yv)) << n;
  }
}

// fp16 rows (an f16 KV cache) convert as the scalar bit-level converters do on every path:
// normal, subnormal, huge (to inf) and halfway values, tails included.
TEST(VecOps, Fp16RowsConvertAsTheScalarConvertersOnEveryPath) {
  for (int64_t n : {0, 1, 7, 8, 9, 31, 64, 133}) {
    std::vector<float> src = random_floats(static_cast<size_t>(n), 21);
    for (size_t i = 0; i < src.size(); i += 5) src[i] *= 70000.0f;  // past fp16's range
    for (size_t i = 2; i < src.size(); i += 7) src[i] *= 1e-6f;     // fp16 subnormals
    if (n > 3) src[3] = 1.0f + 0x1p-11f;  // halfway between two fp16s: to even
    std::vector<uint16_t> want(src.size()), half(src.size());
    for (size_t i = 0; i < src.size(); ++i) want[i] = fp32_to_fp16(src[i]);
    fp32_to_fp16_row(src.data(), half.data(), n);
    EXPECT_EQ(half, want) << n;
    std::vector<float> back(src.size()), back_want(src.size());
    for (size_t i = 0; i < src.size(); ++i) back_want[i] = fp16_to_fp32(want[i]);
    fp16_to_fp32_row(want.data(), back.data(), n);
    EXPECT_TRUE(same_bits(back, back_want)) << n;
    if (cpu_has_avx2()) {
      std::fill(half.begin(), half.end(), uint16_t{0});
      fp32_to_fp16_row_avx2(src.data(), half.data(), n);
      EXPECT_EQ(half, want) << n;
      fp16_to_fp32_row_avx2(want.data(), back.data(), n);
      EXPECT_TRUE(same_bits(back, back_want)) << n;
    }
  }
}

// The row forms equal the one-row calls bit for bit (attention's results must not change with
// how it batches), on every path, for head sizes with and without tails and past one block.
TEST(VecOps, RowFormsEqualOneRowCalls) {
  for (int64_t dim : {1, 7, 8, 64, 70, 72, 136, 256}) {
    const int64_t n_rows = 13, stride = dim * 3 + 5;
    const std::vector<float> rows = random_floats(static_cast<size_t>(n_rows * stride), 21);
    const std::vector<float> q = random_floats(static_cast<size_t>(dim), 22);
    const std::vector<float> p = random_floats(static_cast<size_t>(n_rows), 23);
    const std::vector<float> out0 = random_floats(static_cast<size_t>(dim), 24);
    for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
      if (isa == Isa::kAvx2 && !cpu_has_avx2()) continue;
      const Isa saved = active_isa();
      set_active_isa(isa);
      std::vector<float> scores(static_cast<size_t>(n_rows)), want_scores(scores.size());
      dot_rows_f32(q.data(), rows.data(), stride, n_rows, dim, scores.data());
      std::vector<float> sum = out0, want_sum = out0;
      weighted_sum_rows_f32(p.data(), rows.data(), stride, n_rows, dim, sum.data());
      for (int64_t s = 0; s < n_rows; ++s) {
        want_scores[static_cast<size_t>(s)] = dot_f32(q.data(), rows.data() + s * stride, dim);
        axpy_f32(p[static_cast<size_t>(s)], rows.data() + s * stride, want_sum.data(), dim);
      }
      set_active_isa(saved);
      EXPECT_TRUE(same_bits(scores, want_scores))
          << "dim " << dim << " isa " << static_cast<int>(isa);
      EXPECT_TRUE(same_bits(sum, want_sum)) << "dim " << dim << " isa " << static_cast<int>(isa);
    }
  }
}

TEST(VecOps, ExpIsWithinTwoUlpOverTheUsefulRange) {
  for (float x = -87.0f; x <= 88.0f; x += 0.01171875f) {
    const double want = std::exp(static_cast<double>(x));
    const float got = exp_f32(x);
    EXPECT_LE(std::fabs(got - want), 2.5 * std::fabs(want) * 0x1p-23) << x;
  }
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_TRUE(std::isfinite(exp_f32(1000.0f)));
  EXPECT_GT(exp_f32(1000.0f), 1e38f);
  EXPECT_LT(exp_f32(-1000.0f), 1.2e-38f);
  EXPECT_GE(exp_f32(-1000.0f), 0.0f);
}

TEST(VecOps, SiluMulIsBitwiseEqualOnBothPaths) {
  for (int64_t n : {0, 1, 7, 8, 9, 64, 1536, 1539}) {
    std::vector<float> x = random_floats(static_cast<size_t>(n), 31),
                       up = random_floats(static_cast<size_t>(n), 32);
    for (float& v : x) v *= 20.0f;  // reaches both tails of the clamp
    std::vector<float> g[2];
    int paths = 0;
    for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
      if (isa == Isa::kAvx2 && !cpu_has_avx2()) continue;
      const Isa saved = active_isa();
      set_active_isa(isa);
      g[paths] = x;
      silu_mul_f32(g[paths].data(), up.data(), n);
      set_active_isa(saved);
      ++paths;
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto u = static_cast<size_t>(i);
      const double silu = x[u] / (1.0 + std::exp(-static_cast<double>(x[u]))) * up[u];
      EXPECT_NEAR(g[0][u], silu, 1e-6 * std::fabs(silu) + 1e-30) << x[u];
    }
    if (paths == 2) {
      EXPECT_TRUE(same_bits(g[0], g[1])) << n;
    }
  }
}

// The result must not depend on where the inputs sit (attention calls it on cache rows at any
// offset): same values at different alignments give the same bits.
TEST(VecOps, DotIsIndependentOfAlignment) {
  const std::vector<float> a = random_floats(64, 5), b = random_floats(64, 6);
  std::vector<float> a2(67), b2(67);
  for (size_t i = 0; i < 64; ++i) {
    a2[i + 3] = a[i];
    b2[i + 1] = b[i];
  }
  EXPECT_EQ(dot_f32(a.data(), b.data(), 64), dot_f32(a2.data() + 3, b2.data() + 1, 64));
}

}  // namespace
// The several-query forms equal one-query calls on the scalar path, bit for bit, on every path:
// every query count (AVX2 tiles of 3, 2 + 2 and leftovers; AVX-512 tiles of 6 for scores and 6
// or 3 per 64 or 128 columns for sums), row counts around the 4-row tile, and dims whose
// columns fall into every AVX-512 block (128, 64, 32, 16) and tail (8-wide and scalar).
TEST(VecOps, MultiQueryFormsEqualOneQueryCalls) {
  for (int64_t dim : {5, 8, 24, 64, 72, 128, 200, 256}) {
    for (int64_t nq : {1, 2, 3, 4, 5, 6, 7, 9, 12, 13}) {
      for (int64_t n_rows : {0, 1, 4, 6, 13}) {
        const int64_t stride = dim + 3, q_stride = dim + 1, out_stride = n_rows + 2;
        const std::vector<float> rows =
            random_floats(static_cast<size_t>((n_rows + 1) * stride), 41);
        const std::vector<float> q = random_floats(static_cast<size_t>(nq * q_stride), 42);
        const std::vector<float> p = random_floats(static_cast<size_t>(nq * out_stride), 43);
        const int64_t sum_stride = dim + 2;
        const std::vector<float> out0 = random_floats(static_cast<size_t>(nq * sum_stride), 44);
        for (Isa isa : kAllIsas) {
          if (!cpu_supports(isa)) continue;
          const Isa saved = active_isa();
          set_active_isa(isa);
          std::vector<float> scores(static_cast<size_t>(nq * out_stride), -1.0f),
              want_scores = scores;
          dot_rows_multi_f32(q.data(), q_stride, nq, rows.data(), stride, n_rows, dim,
                             scores.data(), out_stride);
          std::vector<float> sum = out0, want_sum = out0;
          weighted_sum_rows_multi_f32(p.data(), out_stride, nq, rows.data(), stride, n_rows, dim,
                                      sum.data(), sum_stride);
          set_active_isa(Isa::kScalar);
          for (int64_t j = 0; j < nq; ++j) {
            dot_rows_f32(q.data() + j * q_stride, rows.data(), stride, n_rows, dim,
                         want_scores.data() + j * out_stride);
            weighted_sum_rows_f32(p.data() + j * out_stride, rows.data(), stride, n_rows, dim,
                                  want_sum.data() + j * sum_stride);
          }
          set_active_isa(saved);
          const std::string where = "dim " + std::to_string(dim) + " nq " + std::to_string(nq) +
                                    " rows " + std::to_string(n_rows) + " isa " +
                                    std::to_string(static_cast<int>(isa));
          EXPECT_TRUE(same_bits(scores, want_scores)) << where;
          EXPECT_TRUE(same_bits(sum, want_sum)) << where;
          if (isa == Isa::kAvx512Vnni) {  // the AVX-512 kernels themselves, not only the dispatch
            std::vector<float> direct_scores(scores.size(), -1.0f), direct_sum = out0;
            dot_rows_multi_f32_avx512(q.data(), q_stride, nq, rows.data(), stride, n_rows, dim,
                                      direct_scores.data(), out_stride);
            weighted_sum_rows_multi_f32_avx512(p.data(), out_stride, nq, rows.data(), stride,
                                               n_rows, dim, direct_sum.data(), sum_stride);
            EXPECT_TRUE(same_bits(direct_scores, want_scores)) << where;
            EXPECT_TRUE(same_bits(direct_sum, want_sum)) << where;
          }
        }
      }
    }
  }
}

// softmax_exp_f32's AVX2 path computes glibc's expf itself; its results must equal std::exp's
// bits (the scalar path) for every argument <= 0: a dense sweep of [-110, 0] (through the
// subnormal results below -87.3 and the zero cut-off at -103.97), random magnitudes over the
// whole negative range, and the edges (zeros, subnormal arguments, -inf, NaN).
TEST(VecOps, SoftmaxExpEqualsStdExpBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: the scalar path is std::exp itself";
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           -1e-45f,
                           -1e-40f,
                           -1e-30f,
                           -0x1.9fe368p6f,
                           std::nextafter(-0x1.9fe368p6f, 0.0f),
                           -0x1.9fe36ap6f,
                           -1e30f,
                           -INFINITY,
                           -0x1.f8cbb2p+5f};
  for (float x = -110.0f; x <= 0.0f; x += 0.000244140625f) xs.push_back(x);
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    xs.push_back(-std::bit_cast<float>(static_cast<uint32_t>(rng() % 0x7f800000u)));
  }
  // Rows with max 0 and scale 1, so each argument reaches exp unchanged.
  for (size_t start = 0; start < xs.size(); start += 1000) {
    const size_t n = std::min<size_t>(1000, xs.size() - start);
    std::vector<float> row(xs.begin() + static_cast<std::ptrdiff_t>(start),
                           xs.begin() + static_cast<std::ptrdiff_t>(start + n));
    row.push_back(0.0f);
    std::vector<float> a = row, b = row;
    const float sa = softmax_exp_f32_scalar(a.data(), static_cast<int64_t>(a.size()), 1.0f);
    const float sb = softmax_exp_f32_avx2(b.data(), static_cast<int64_t>(b.size()), 1.0f);
    ASSERT_TRUE(same_bits(a, b)) << "rows from " << start;
    ASSERT_EQ(std::bit_cast<uint32_t>(sa), std::bit_cast<uint32_t>(sb));
  }
  std::vector<float> nan_row = {0.0f, NAN, -1.0f};
  softmax_exp_f32_avx2(nan_row.data(), 3, 1.0f);
  EXPECT_TRUE(std::isnan(nan_row[1]));
  EXPECT_EQ(nan_row[0], 1.0f);
}

// With a scale and rows of every length around the 4- and 8-wide steps, both paths give the
// same numerators and the same sum.
TEST(VecOps, SoftmaxExpPathsAgreeOnScaledRows) {
  for (int64_t n : {1, 3, 4, 7, 8, 9, 31, 400}) {
    std::vector<float> row = random_floats(static_cast<size_t>(n), 51);
    for (float& v : row) v *= 30.0f;
    std::vector<float> a = row, b = row;
    const float sa = softmax_exp_f32_scalar(a.data(), n, 0.125f);
    float sb = sa;
    if (cpu_has_avx2()) {
      sb = softmax_exp_f32_avx2(b.data(), n, 0.125f);
    } else {
      b = a;
    }
    EXPECT_TRUE(same_bits(a, b)) << n;
    EXPECT_EQ(std::bit_cast<uint32_t>(sa), std::bit_cast<uint32_t>(sb)) << n;
    EXPECT_EQ(*std::max_element(a.begin(), a.end()), 1.0f);  // the max's numerator
  }
}

// The AVX2 path of exp_shifted_scaled_f64 computes glibc's exp itself; it must give std::exp's
// bits (the scalar path) for softmax weights of every scale: arguments from the tiny range (left
// to std::exp) through the polynomial's range to the |y| >= 512 special cases, plus -inf and NaN.
TEST(VecOps, ExpShiftedScaledEqualsStdExpBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU: the scalar path is std::exp itself";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> logit(-40.0f, 40.0f);
  std::vector<float> x(100003);
  for (float& v : x) v = logit(rng);
  x[5] = 40.0f;
  x[6] = -INFINITY;
  x[7] = NAN;
  x[8] = std::nextafter(40.0f, 0.0f);
  for (double scale : {1e-3, 0.37, 1.0, 1.0 / 0.7, 3.0, 25.0, 1e4}) {
    std::vector<double> a(x.size()), b(x.size());
    exp_shifted_scaled_f64_scalar(x.data(), static_cast<int64_t>(x.size()), 40.0, scale, a.data());
    exp_shifted_scaled_f64_avx2(x.data(), static_cast<int64_t>(x.size()), 40.0, scale, b.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      ASSERT_EQ(std::bit_cast<uint64_t>(a[i]), std::bit_cast<uint64_t>(b[i]))
          << "x " << x[i] << " scale " << scale;
    }
  }
}

namespace {

// A row of n entries for the maximum and argmax tests: NaN (with_nan), -inf, +inf (every 7th
// trial), signed zeros (the sign by trial), ties at 3, and small integers.
std::vector<float> edge_case_row(std::mt19937& rng, int64_t n, int trial, bool with_nan) {
  std::uniform_int_distribution<int> pick(0, 9);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    switch (pick(rng)) {
      case 0:
        v = with_nan ? NAN : -INFINITY;
        break;
      case 1:
        v = -INFINITY;
        break;
      case 2:
        v = trial % 2 == 0 ? 0.0f : -0.0f;
        break;
      case 3:
        v = trial % 7 == 0 ? INFINITY : 3.0f;  // otherwise ties
        break;
      default:
        v = static_cast<float>(pick(rng)) - 5.0f;
    }
  }
  return x;
}

}  // namespace

// Greedy decoding's argmax: the first maximum, NaNs skipped, the same index on both paths, for
// ties, signed zeros, infinities, NaNs anywhere (all-NaN rows included) and every tail length.
TEST(VecOps, ArgmaxPathsAgree) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t n = 1 + trial % 37 + (trial % 25 == 0 ? 49152 : 0);
    std::vector<float> x = edge_case_row(rng, n, trial, /*with_nan=*/true);
    if (trial % 11 == 0) std::fill(x.begin(), x.end(), NAN);
    const int64_t want = argmax_f32_scalar(x.data(), n);
    if (cpu_has_avx2()) {
      ASSERT_EQ(argmax_f32_avx2(x.data(), n), want) << "trial " << trial;
    }
    ASSERT_GE(want, 0);
    ASSERT_LT(want, n);
  }
  const std::vector<float> simple = {1.0f, 7.0f, 2.0f, 7.0f};
  EXPECT_EQ(argmax_f32(simple.data(), 4), 1);
  const std::vector<float> nan_first = {NAN, 2.0f, NAN, 5.0f, 5.0f};
  EXPECT_EQ(argmax_f32(nan_first.data(), 5), 3);
}

// Sampling's logit check: the maximum, or NaN when any entry is NaN, on both paths, for
// infinities, signed zeros, NaNs at every position (each vector lane and the tail) and every
// tail length; the maximum itself compared against a plain loop.
TEST(VecOps, MaxPathsAgreeAndReportNaN) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t n = 1 + trial % 71 + (trial % 25 == 0 ? 49152 : 0);
    std::vector<float> x = edge_case_row(rng, n, trial, /*with_nan=*/false);
    const bool with_nan = trial % 3 == 0;
    if (with_nan) x[static_cast<size_t>(trial) % x.size()] = NAN;
    float plain = x[0];
    for (float v : x) plain = v > plain ? v : plain;
    for (bool avx2 : {false, true}) {
      if (avx2 && !cpu_has_avx2()) continue;
      const float got = avx2 ? max_f32_avx2(x.data(), n) : max_f32_scalar(x.data(), n);
      if (with_nan) {
        ASSERT_TRUE(std::isnan(got)) << "trial " << trial << " avx2 " << avx2;
      } else {
        ASSERT_EQ(got, plain) << "trial " << trial << " avx2 " << avx2;
      }
    }
  }
  const std::vector<float> simple = {1.0f, 7.0f, -2.0f};
  EXPECT_EQ(max_f32(simple.data(), 3), 7.0f);
}

// Gemma's GeGLU gate: both paths give the table rule's bits. The table is random, so an index
// off by one anywhere (rounding ties between fp16 neighbours, subnormals, the sign) shows; the
// inputs cover the +-10 cut-offs, fp16 rounding ties, fp16 subnormals, overflow, NaN and tails.
TEST(VecOps, GeluTablePathsAgree) {
  std::mt19937 rng(19);
  std::vector<float> table(1 << 16);
  std::uniform_real_distribution<float> any(-50.0f, 50.0f);
  for (float& t : table) t = any(rng);
  std::vector<float> special = {-10.0f,
                                10.0f,
                                std::nextafter(-10.0f, 0.0f),
                                std::nextafter(10.0f, 0.0f),
                                0.0f,
                                -0.0f,
                                1e-6f,
                                -3e-7f,
                                6e-8f,
                                65504.0f,
                                70000.0f,
                                -1e30f,
                                NAN,
                                INFINITY,
                                -INFINITY};
  // fp16 rounding ties: halfway between neighbouring fp16 values (1 + k/1024 + 1/2048).
  for (int k = 0; k < 8; ++k) special.push_back(1.0f + (2.0f * k + 1.0f) / 2048.0f);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t n = 1 + trial % 53;
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    for (size_t i = 0; i < gate.size(); ++i) {
      gate[i] =
          trial % 4 == 0 ? special[(i + static_cast<size_t>(trial)) % special.size()] : normal(rng);
      up[i] = normal(rng);
    }
    std::vector<float> want(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const float x = gate[i];
      const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[fp32_to_fp16(x)];
      want[i] = g * up[i];
    }
    for (bool avx2 : {false, true}) {
      if (avx2 && !cpu_has_avx2()) continue;
      std::vector<float> got = gate;
      (avx2 ? gelu_table_mul_f32_avx2 : gelu_table_mul_f32_scalar)(got.data(), up.data(), n,
                                                                   table.data());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
            << "trial " << trial << " i " << i << " x " << gate[i] << " avx2 " << avx2;
      }
    }
  }
}

}  // namespace specdec
