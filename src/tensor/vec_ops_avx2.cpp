// AVX2 float primitives; compiled with -mavx2 -mfma -mf16c, reached only after cpu_has_avx2().
// Raw intrinsics, no STL (see simd_avx2.h).
//
// Both give the same bits as the scalar versions in vec_ops.cpp: the dot keeps the scalar
// code's 8 partial sums as the 8 lanes of one vector (multiply, then add: no fused
// multiply-add), pads the tail with zeros (adding +0 changes no partial sum) and reduces in the
// scalar order; axpy multiplies then adds. Attention therefore rounds the same whichever path
// runs, and the oracle tolerances, which are tight for deep models, hold on both.
#include <immintrin.h>

#include "tensor/vec_ops.h"

namespace specdec {

namespace {

// Lanes j and j + 4 first, then ((0+4) + (1+5)) + ((2+6) + (3+7)), as the scalar code.
inline float reduce8(__m256 acc) {
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 pairs = _mm_hadd_ps(quad, quad);  // [q0 + q1, q2 + q3, ...]
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// reduce8 of four accumulators at once, as [reduce8(a), reduce8(b), reduce8(c), reduce8(d)]:
// the same additions in the same order, two vectors wide.
inline __m128 reduce8_x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  // [a.lo + a.hi, b.lo + b.hi] and the same for c, d: lanes j and j + 4 first.
  const __m256 ab =
      _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd =
      _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // Per 128-bit half: [a01, a23, c01, c23] | [b01, b23, d01, d23], then [a, c, a, c] | [b, d, b,
  // d].
  const __m256 pairs = _mm256_hadd_ps(ab, cd);
  const __m256 sums = _mm256_hadd_ps(pairs, pairs);
  return _mm_unpacklo_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

inline float dot_one(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < n) {
    alignas(32) float ta[8] = {}, tb[8] = {};
    for (int64_t j = 0; i + j < n; ++j) {
      ta[j] = a[i + j];
      tb[j] = b[i + j];
    }
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_load_ps(ta), _mm256_load_ps(tb)));
  }
  return reduce8(acc);
}

// dot_one for 4 rows at once (n a multiple of 8): the same operations per row, but four
// independent add chains instead of one, so the adds' latency no longer bounds the loop.
inline void dot_four(const float* q, const float* rows, int64_t stride, int64_t n, float* out) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int r = 0; r < 4; ++r) {
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(qv, _mm256_loadu_ps(rows + r * stride + i)));
    }
  }
  _mm_storeu_ps(out, reduce8_x4(acc[0], acc[1], acc[2], acc[3]));
}

// exp_f32 of vec_ops.cpp, 8 lanes at a time, operation for operation.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3365447504f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

}  // namespace

void silu_mul_f32_avx2(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  auto step = [&](const float* g_in, const float* u_in, float* out) {
    const __m256 g = _mm256_loadu_ps(g_in);
    const __m256 e = exp8(_mm256_sub_ps(zero, g));
    _mm256_storeu_ps(out,
                     _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(u_in)));
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) step(gate + i, up + i, gate + i);
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {}, o[8];
    for (int64_t j = 0; i + j < n; ++j) {
      g[j] = gate[i + j];
      u[j] = up[i + j];
    }
    step(g, u, o);
    for (int64_t j = 0; i + j < n; ++j) gate[i + j] = o[j];
  }
}

float dot_f32_avx2(const float* a, const float* b, int64_t n) { return dot_one(a, b, n); }

void dot_rows_f32_avx2(const float* q, const float* rows, int64_t stride, int64_t n_rows,
                       int64_t dim, float* out) {
  int64_t s = 0;
  if (dim % 8 == 0) {
    for (; s + 4 <= n_rows; s += 4) dot_four(q, rows + s * stride, stride, dim, out + s);
  }
  for (; s < n_rows; ++s) out[s] = dot_one(q, rows + s * stride, dim);
}

void weighted_sum_rows_f32_avx2(const float* p, const float* rows, int64_t stride, int64_t n_rows,
                                int64_t dim, float* out) {
  // Columns in blocks of up to 64 kept in registers across all rows; per element the same
  // multiply-then-add sequence over s as axpy_f32 row by row.
  constexpr int64_t kBlock = 64;
  int64_t d0 = 0;
  for (; d0 + 8 <= dim; d0 += kBlock) {
    const int64_t nv = (dim - d0 >= kBlock ? kBlock : (dim - d0)) / 8;  // whole vectors
    __m256 acc[kBlock / 8];
    for (int64_t j = 0; j < nv; ++j) acc[j] = _mm256_loadu_ps(out + d0 + 8 * j);
    for (int64_t s = 0; s < n_rows; ++s) {
      const __m256 ps = _mm256_set1_ps(p[s]);
      const float* v = rows + s * stride + d0;
      for (int64_t j = 0; j < nv; ++j) {
        acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(ps, _mm256_loadu_ps(v + 8 * j)));
      }
    }
    for (int64_t j = 0; j < nv; ++j) _mm256_storeu_ps(out + d0 + 8 * j, acc[j]);
    if (nv < kBlock / 8) {
      d0 += 8 * nv;
      break;
    }
  }
  for (int64_t d = d0; d < dim; ++d) {  // columns past the last whole vector
    float y = out[d];
    for (int64_t s = 0; s < n_rows; ++s) {
      const float prod = p[s] * rows[s * stride + d];
      y = y + prod;
    }
    out[d] = y;
  }
}

void axpy_f32_avx2(float alpha, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  }
  for (; i < n; ++i) {
    const float p = alpha * x[i];  // two roundings, as the scalar loop
    y[i] = y[i] + p;
  }
}

namespace {

// NQ queries x 4 rows of scores with one load of each row chunk: 4 * NQ accumulators, each the
// 8 partial sums dot_one keeps for its (query, row), updated chunk by chunk in the same order.
template <int NQ>
void dot_tile(const float* q, int64_t q_stride, const float* rows, int64_t stride, int64_t dim,
              float* out, int64_t out_stride) {
  __m256 acc[NQ][4];
  for (int j = 0; j < NQ; ++j) {
    for (int r = 0; r < 4; ++r) acc[j][r] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < dim; i += 8) {
    __m256 qv[NQ];
    for (int j = 0; j < NQ; ++j) qv[j] = _mm256_loadu_ps(q + j * q_stride + i);
    for (int r = 0; r < 4; ++r) {
      const __m256 kv = _mm256_loadu_ps(rows + r * stride + i);
      for (int j = 0; j < NQ; ++j) acc[j][r] = _mm256_add_ps(acc[j][r], _mm256_mul_ps(qv[j], kv));
    }
  }
  for (int j = 0; j < NQ; ++j) {
    _mm_storeu_ps(out + j * out_stride, reduce8_x4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
  }
}

template <int NQ>
void dot_multi_rows(const float* q, int64_t q_stride, const float* rows, int64_t stride,
                    int64_t n_rows, int64_t dim, float* out, int64_t out_stride) {
  int64_t s = 0;
  for (; s + 4 <= n_rows; s += 4) {
    dot_tile<NQ>(q, q_stride, rows + s * stride, stride, dim, out + s, out_stride);
  }
  for (; s < n_rows; ++s) {
    for (int j = 0; j < NQ; ++j)
      out[j * out_stride + s] = dot_one(q + j * q_stride, rows + s * stride, dim);
  }
}

// NQ queries x NV vectors of columns: per element the multiply-then-add over rows in order that
// weighted_sum_rows_f32_avx2 does, with each row chunk loaded once for all NQ queries.
template <int NQ, int NV>
void weighted_tile(const float* p, int64_t p_stride, const float* rows, int64_t stride,
                   int64_t n_rows, float* out, int64_t out_stride) {
  __m256 acc[NQ][NV];
  for (int j = 0; j < NQ; ++j) {
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_loadu_ps(out + j * out_stride + 8 * v);
  }
  for (int64_t s = 0; s < n_rows; ++s) {
    __m256 vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = _mm256_loadu_ps(rows + s * stride + 8 * v);
    for (int j = 0; j < NQ; ++j) {
      const __m256 ps = _mm256_set1_ps(p[j * p_stride + s]);
      for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_add_ps(acc[j][v], _mm256_mul_ps(ps, vv[v]));
    }
  }
  for (int j = 0; j < NQ; ++j) {
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + j * out_stride + 8 * v, acc[j][v]);
  }
}

template <int NQ>
void weighted_multi(const float* p, int64_t p_stride, const float* rows, int64_t stride,
                    int64_t n_rows, int64_t dim, float* out, int64_t out_stride) {
  // Column blocks of 32 (4 vectors): 4 * NQ accumulators stay in registers.
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    weighted_tile<NQ, 4>(p, p_stride, rows + d, stride, n_rows, out + d, out_stride);
  }
  for (; d + 8 <= dim; d += 8) {
    weighted_tile<NQ, 1>(p, p_stride, rows + d, stride, n_rows, out + d, out_stride);
  }
  if (d < dim) {  // columns past the last whole vector: weighted_sum_rows_f32_avx2's scalar tail
    for (int j = 0; j < NQ; ++j) {
      weighted_sum_rows_f32_avx2(p + j * p_stride, rows + d, stride, n_rows, dim - d,
                                 out + j * out_stride + d);
    }
  }
}

}  // namespace

void dot_rows_multi_f32_avx2(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                             int64_t stride, int64_t n_rows, int64_t dim, float* out,
                             int64_t out_stride) {
  if (dim % 8 != 0) {  // tails: the one-query form, which pads them as dot_one does
    for (int64_t j = 0; j < nq; ++j) {
      dot_rows_f32_avx2(q + j * q_stride, rows, stride, n_rows, dim, out + j * out_stride);
    }
    return;
  }
  // Tiles of 3 queries (12 accumulators and 4 row chunks fit the 16 registers); 4 goes as 2 + 2.
  int64_t j = 0;
  for (; nq - j >= 3 && nq - j != 4; j += 3) {
    dot_multi_rows<3>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
  for (; nq - j >= 2; j += 2) {
    dot_multi_rows<2>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
  if (j < nq) {
    dot_multi_rows<1>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
}

void weighted_sum_rows_multi_f32_avx2(const float* p, int64_t p_stride, int64_t nq,
                                      const float* rows, int64_t stride, int64_t n_rows,
                                      int64_t dim, float* out, int64_t out_stride) {
  int64_t j = 0;
  for (; nq - j >= 3 && nq - j != 4; j += 3) {
    weighted_multi<3>(p + j * p_stride, p_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
  for (; nq - j >= 2; j += 2) {
    weighted_multi<2>(p + j * p_stride, p_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
  if (j < nq) {
    weighted_multi<1>(p + j * p_stride, p_stride, rows, stride, n_rows, dim, out + j * out_stride,
                      out_stride);
  }
}

namespace {

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, the FMA build that x86-64 runs on AVX2 CPUs),
// 4 lanes in double precision: x * 32 / ln 2 = k + r, exp(x) = 2^(k/32) * p(r) with 2^(k/32)
// from a 32-entry table and a cubic p. Every step rounds as glibc's does (its compiler fuses
// the scaling into both the rounding to k and r), so the bits equal std::exp for every x <= 0
// and NaN, checked exhaustively over all 2^31 such floats when this was written; the tests keep
// a dense sample. Arguments > 0 are not handled (no overflow path).
// kExp2Table[i] = bits of 2^(i/32), correctly rounded, minus i << 47 (the exponent k adds back).
alignas(32) constexpr uint64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

inline __m128 expf_nonpositive4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+0 * 32);
  const __m256d shift = _mm256_set1_pd(0x1.8p+52);
  const __m256d kd_shifted = _mm256_fmadd_pd(inv_ln2_n, xd, shift);  // k in the low bits
  const __m256d kd = _mm256_sub_pd(kd_shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
  const __m256i ki = _mm256_castpd_si256(kd_shifted);
  const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  __m256i t = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kExp2Table), idx, 8);
  t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32);
  const __m256d c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32);
  const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-1 / 32);
  const __m256d z = _mm256_fmadd_pd(c0, r, c1);
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(c2, r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  y = _mm256_mul_pd(y, s);
  __m128 res = _mm256_cvtpd_ps(y);
  // Below log(2^-150) glibc returns 0 (the table index would wrap); NaN returns x + x.
  res = _mm_andnot_ps(_mm_cmp_ps(x, _mm_set1_ps(-0x1.9fe368p6f), _CMP_LT_OQ), res);
  return _mm_blendv_ps(res, _mm_add_ps(x, x), _mm_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace

float softmax_exp_f32_avx2(float* row, int64_t n, float scale) {
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(row + i), vscale);
    _mm256_storeu_ps(row + i, v);
    vmax = _mm256_max_ps(v, vmax);  // keeps vmax when v is NaN, as std::max(vmax, v)
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float max_v = -__builtin_inff();
  for (float m : lanes) max_v = max_v < m ? m : max_v;  // std::max: NaNs are skipped
  for (; i < n; ++i) {
    row[i] *= scale;
    max_v = max_v < row[i] ? row[i] : max_v;
  }
  // The sum stays sequential, as the scalar loop adds: only the exps run 8 wide.
  const __m128 vm = _mm_set1_ps(max_v);
  float sum = 0.0f;
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 e = expf_nonpositive4(_mm_sub_ps(_mm_loadu_ps(row + i), vm));
    _mm_storeu_ps(row + i, e);
    sum += row[i];
    sum += row[i + 1];
    sum += row[i + 2];
    sum += row[i + 3];
  }
  if (i < n) {
    alignas(16) float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t j = 0; i + j < n; ++j) tail[j] = row[i + j] - max_v;
    alignas(16) float e[4];
    _mm_store_ps(e, expf_nonpositive4(_mm_load_ps(tail)));
    for (int64_t j = 0; i + j < n; ++j) {
      row[i + j] = e[j];
      sum += e[j];
    }
  }
  return sum;
}

}  // namespace specdec
