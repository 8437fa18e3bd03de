// AVX2 float primitives; compiled with -mavx2 -mfma -mf16c, reached only after cpu_has_avx2().
// Raw intrinsics, no STL (see simd_avx2.h).
//
// Both give the same bits as the scalar versions in vec_ops.cpp: the dot keeps the scalar
// code's 8 partial sums as the 8 lanes of one vector (multiply, then add: no fused
// multiply-add), pads the tail with zeros (adding +0 changes no partial sum) and reduces in the
// scalar order; axpy multiplies then adds. Attention therefore rounds the same whichever path
// runs, and the oracle tolerances, which are tight for deep models, hold on both.
#include <immintrin.h>

#include "tensor/score_tiles_x86.h"
#include "tensor/vec_ops.h"

namespace specdec {

namespace {

// Lanes j and j + 4 first, then ((0+4) + (1+5)) + ((2+6) + (3+7)), as the scalar code.
inline float reduce8(__m256 acc) {
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 pairs = _mm_hadd_ps(quad, quad);  // [q0 + q1, q2 + q3, ...]
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
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

// NQ queries x NV vectors of columns: per element the multiply-then-add over rows in order that
// weighted_sum_rows_f32_avx2 does, with each row chunk loaded once for all NQ queries.
template <int NQ, int NV>
inline __attribute__((always_inline)) void weighted_tile(const float* p, int64_t p_stride,
                                                         const float* rows, int64_t stride,
                                                         int64_t n_rows, float* out,
                                                         int64_t out_stride) {
  __m256 acc[NQ][NV];
  for (int j = 0; j < NQ; ++j) {
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_loadu_ps(out + j * out_stride + 8 * v);
  }
  for (int64_t s = 0; s < n_rows; ++s) {
    _mm_prefetch(reinterpret_cast<const char*>(rows + (s + kPrefetchRows) * stride), _MM_HINT_T0);
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
  // Column blocks of NV vectors with NQ * NV accumulators, NV row chunks and a broadcast in
  // registers (3 x 2 or 2 x 4: at most 13 of the 16, so nothing spills and each row chunk is
  // loaded once for all NQ queries).
  constexpr int kNV = NQ == 3 ? 2 : 4;
  int64_t d = 0;
  for (; d + 8 * kNV <= dim; d += 8 * kNV) {
    weighted_tile<NQ, kNV>(p, p_stride, rows + d, stride, n_rows, out + d, out_stride);
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
  // Tiles of 2 queries x 4 rows (score_tiles_x86.h): 8 accumulators, the 4 row chunks and a
  // query chunk in 13 of the 16 registers, each row chunk loaded once. (3 x 4 needs 17: the
  // compiler then reloads row chunks, and such a tile ran at the speed of three one-query calls.)
  int64_t j = 0;
  for (; nq - j >= 2; j += 2) {
    dot_queries<2>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
                   out_stride);
  }
  if (j < nq) {
    dot_queries<1>(q + j * q_stride, q_stride, rows, stride, n_rows, dim, out + j * out_stride,
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

namespace {

// glibc's exp (sysdeps/ieee754/dbl-64/e_exp.c, its FMA build): x * 128 / ln 2 = k + r',
// exp(x) = 2^(k/128) * exp(r) with r = x - k ln2/128 in two parts, 2^(k/128) = H * (1 + T) from a
// table and exp(r) - 1 from a quartic, fused as glibc's compiler fuses them. Valid for
// 2^-54 <= |x| < 512; checked against std::exp on 1.2e8 random arguments in [-512, 0] when written,
// and the tests keep a sample. kExpTable[2k] = bits of T[k], kExpTable[2k + 1] = bits of H[k] (the
// correctly rounded 2^(k/128)) minus k << 45.
alignas(32) constexpr uint64_t kExpTable[256] = {
    0x0000000000000000, 0x3ff0000000000000, 0x3c9b3b4f1a88bf6e, 0x3feff63da9fb3335,
    0xbc7160139cd8dc5d, 0x3fefec9a3e778061, 0xbc905e7a108766d1, 0x3fefe315e86e7f85,
    0x3c8cd2523567f613, 0x3fefd9b0d3158574, 0xbc8bce8023f98efa, 0x3fefd06b29ddf6de,
    0x3c60f74e61e6c861, 0x3fefc74518759bc8, 0x3c90a3e45b33d399, 0x3fefbe3ecac6f383,
    0x3c979aa65d837b6d, 0x3fefb5586cf9890f, 0x3c8eb51a92fdeffc, 0x3fefac922b7247f7,
    0x3c3ebe3d702f9cd1, 0x3fefa3ec32d3d1a2, 0xbc6a033489906e0b, 0x3fef9b66affed31b,
    0xbc9556522a2fbd0e, 0x3fef9301d0125b51, 0xbc5080ef8c4eea55, 0x3fef8abdc06c31cc,
    0xbc91c923b9d5f416, 0x3fef829aaea92de0, 0x3c80d3e3e95c55af, 0x3fef7a98c8a58e51,
    0xbc801b15eaa59348, 0x3fef72b83c7d517b, 0xbc8f1ff055de323d, 0x3fef6af9388c8dea,
    0x3c8b898c3f1353bf, 0x3fef635beb6fcb75, 0xbc96d99c7611eb26, 0x3fef5be084045cd4,
    0x3c9aecf73e3a2f60, 0x3fef54873168b9aa, 0xbc8fe782cb86389d, 0x3fef4d5022fcd91d,
    0x3c8a6f4144a6c38d, 0x3fef463b88628cd6, 0x3c807a05b0e4047d, 0x3fef3f49917ddc96,
    0x3c968efde3a8a894, 0x3fef387a6e756238, 0x3c875e18f274487d, 0x3fef31ce4fb2a63f,
    0x3c80472b981fe7f2, 0x3fef2b4565e27cdd, 0xbc96b87b3f71085e, 0x3fef24dfe1f56381,
    0x3c82f7e16d09ab31, 0x3fef1e9df51fdee1, 0xbc3d219b1a6fbffa, 0x3fef187fd0dad990,
    0x3c8b3782720c0ab4, 0x3fef1285a6e4030b, 0x3c6e149289cecb8f, 0x3fef0cafa93e2f56,
    0x3c834d754db0abb6, 0x3fef06fe0a31b715, 0x3c864201e2ac744c, 0x3fef0170fc4cd831,
    0x3c8fdd395dd3f84a, 0x3feefc08b26416ff, 0xbc86a3803b8e5b04, 0x3feef6c55f929ff1,
    0xbc924aedcc4b5068, 0x3feef1a7373aa9cb, 0xbc9907f81b512d8e, 0x3feeecae6d05d866,
    0xbc71d1e83e9436d2, 0x3feee7db34e59ff7, 0xbc991919b3ce1b15, 0x3feee32dc313a8e5,
    0x3c859f48a72a4c6d, 0x3feedea64c123422, 0xbc9312607a28698a, 0x3feeda4504ac801c,
    0xbc58a78f4817895b, 0x3feed60a21f72e2a, 0xbc7c2c9b67499a1b, 0x3feed1f5d950a897,
    0x3c4363ed60c2ac11, 0x3feece086061892d, 0x3c9666093b0664ef, 0x3feeca41ed1d0057,
    0x3c6ecce1daa10379, 0x3feec6a2b5c13cd0, 0x3c93ff8e3f0f1230, 0x3feec32af0d7d3de,
    0x3c7690cebb7aafb0, 0x3feebfdad5362a27, 0x3c931dbdeb54e077, 0x3feebcb299fddd0d,
    0xbc8f94340071a38e, 0x3feeb9b2769d2ca7, 0xbc87deccdc93a349, 0x3feeb6daa2cf6642,
    0xbc78dec6bd0f385f, 0x3feeb42b569d4f82, 0xbc861246ec7b5cf6, 0x3feeb1a4ca5d920f,
    0x3c93350518fdd78e, 0x3feeaf4736b527da, 0x3c7b98b72f8a9b05, 0x3feead12d497c7fd,
    0x3c9063e1e21c5409, 0x3feeab07dd485429, 0x3c34c7855019c6ea, 0x3feea9268a5946b7,
    0x3c9432e62b64c035, 0x3feea76f15ad2148, 0xbc8ce44a6199769f, 0x3feea5e1b976dc09,
    0xbc8c33c53bef4da8, 0x3feea47eb03a5585, 0xbc845378892be9ae, 0x3feea34634ccc320,
    0xbc93cedd78565858, 0x3feea23882552225, 0x3c5710aa807e1964, 0x3feea155d44ca973,
    0xbc93b3efbf5e2228, 0x3feea09e667f3bcd, 0xbc6a12ad8734b982, 0x3feea012750bdabf,
    0xbc6367efb86da9ee, 0x3fee9fb23c651a2f, 0xbc80dc3d54e08851, 0x3fee9f7df9519484,
    0xbc781f647e5a3ecf, 0x3fee9f75e8ec5f74, 0xbc86ee4ac08b7db0, 0x3fee9f9a48a58174,
    0xbc8619321e55e68a, 0x3fee9feb564267c9, 0x3c909ccb5e09d4d3, 0x3feea0694fde5d3f,
    0xbc7b32dcb94da51d, 0x3feea11473eb0187, 0x3c94ecfd5467c06b, 0x3feea1ed0130c132,
    0x3c65ebe1abd66c55, 0x3feea2f336cf4e62, 0xbc88a1c52fb3cf42, 0x3feea427543e1a12,
    0xbc9369b6f13b3734, 0x3feea589994cce13, 0xbc805e843a19ff1e, 0x3feea71a4623c7ad,
    0xbc94d450d872576e, 0x3feea8d99b4492ed, 0x3c90ad675b0e8a00, 0x3feeaac7d98a6699,
    0x3c8db72fc1f0eab4, 0x3feeace5422aa0db, 0xbc65b6609cc5e7ff, 0x3feeaf3216b5448c,
    0x3c7bf68359f35f44, 0x3feeb1ae99157736, 0xbc93091fa71e3d83, 0x3feeb45b0b91ffc6,
    0xbc5da9b88b6c1e29, 0x3feeb737b0cdc5e5, 0xbc6c23f97c90b959, 0x3feeba44cbc8520f,
    0xbc92434322f4f9aa, 0x3feebd829fde4e50, 0xbc85ca6cd7668e4b, 0x3feec0f170ca07ba,
    0x3c71affc2b91ce27, 0x3feec49182a3f090, 0x3c6dd235e10a73bb, 0x3feec86319e32323,
    0xbc87c50422622263, 0x3feecc667b5de565, 0x3c8b1c86e3e231d5, 0x3feed09bec4a2d33,
    0xbc91bbd1d3bcbb15, 0x3feed503b23e255d, 0x3c90cc319cee31d2, 0x3feed99e1330b358,
    0x3c8469846e735ab3, 0x3feede6b5579fdbf, 0xbc82dfcd978e9db4, 0x3feee36bbfd3f37a,
    0x3c8c1a7792cb3387, 0x3feee89f995ad3ad, 0xbc907b8f4ad1d9fa, 0x3feeee07298db666,
    0xbc55c3d956dcaeba, 0x3feef3a2b84f15fb, 0xbc90a40e3da6f640, 0x3feef9728de5593a,
    0xbc68d6f438ad9334, 0x3feeff76f2fb5e47, 0xbc91eee26b588a35, 0x3fef05b030a1064a,
    0x3c74ffd70a5fddcd, 0x3fef0c1e904bc1d2, 0xbc91bdfbfa9298ac, 0x3fef12c25bd71e09,
    0x3c736eae30af0cb3, 0x3fef199bdd85529c, 0x3c8ee3325c9ffd94, 0x3fef20ab5fffd07a,
    0x3c84e08fd10959ac, 0x3fef27f12e57d14b, 0x3c63cdaf384e1a67, 0x3fef2f6d9406e7b5,
    0x3c676b2c6c921968, 0x3fef3720dcef9069, 0xbc808a1883ccb5d2, 0x3fef3f0b555dc3fa,
    0xbc8fad5d3ffffa6f, 0x3fef472d4a07897c, 0xbc900dae3875a949, 0x3fef4f87080d89f2,
    0x3c74a385a63d07a7, 0x3fef5818dcfba487, 0xbc82919e2040220f, 0x3fef60e316c98398,
    0x3c8e5a50d5c192ac, 0x3fef69e603db3285, 0x3c843a59ac016b4b, 0x3fef7321f301b460,
    0xbc82d52107b43e1f, 0x3fef7c97337b9b5f, 0xbc892ab93b470dc9, 0x3fef864614f5a129,
    0x3c74b604603a88d3, 0x3fef902ee78b3ff6, 0x3c83c5ec519d7271, 0x3fef9a51fbc74c83,
    0xbc8ff7128fd391f0, 0x3fefa4afa2a490da, 0xbc8dae98e223747d, 0x3fefaf482d8e67f1,
    0x3c8ec3bc41aa2008, 0x3fefba1bee615a27, 0x3c842b94c3a9eb32, 0x3fefc52b376bba97,
    0x3c8a64a931d185ee, 0x3fefd0765b6e4540, 0xbc8e37bae43be3ed, 0x3fefdbfdad9cbe14,
    0x3c77893b4d91cd9d, 0x3fefe7c1819e90d8, 0x3c5305c14160cc89, 0x3feff3c22b8f71f1,
};

inline __m256d exp_f64x4(__m256d x) {
  const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep0 * 128);
  const __m256d shift = _mm256_set1_pd(0x1.8p52);
  const __m256d kd_shifted = _mm256_fmadd_pd(inv_ln2_n, x, shift);
  const __m256i ki = _mm256_castpd_si256(kd_shifted);
  const __m256d kd = _mm256_sub_pd(kd_shifted, shift);
  const __m256d r = _mm256_fmadd_pd(kd, _mm256_set1_pd(-0x1.cf79abc9e3b3ap-47),
                                    _mm256_fmadd_pd(kd, _mm256_set1_pd(-0x1.62e42fefa0000p-8), x));
  const __m256i idx = _mm256_slli_epi64(_mm256_and_si256(ki, _mm256_set1_epi64x(127)), 1);
  const auto* table = reinterpret_cast<const long long*>(kExpTable);
  const __m256d tail = _mm256_castsi256_pd(_mm256_i64gather_epi64(table, idx, 8));
  const __m256i scale_bits =
      _mm256_add_epi64(_mm256_i64gather_epi64(table + 1, idx, 8), _mm256_slli_epi64(ki, 45));
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d lo = _mm256_fmadd_pd(r, _mm256_set1_pd(0x1.555555555543cp-3),
                                     _mm256_set1_pd(0x1.ffffffffffdbdp-2));
  const __m256d hi = _mm256_fmadd_pd(r, _mm256_set1_pd(0x1.1111167a4d017p-7),
                                     _mm256_set1_pd(0x1.55555cf172b91p-5));
  __m256d tmp = _mm256_fmadd_pd(r2, lo, _mm256_add_pd(tail, r));
  tmp = _mm256_fmadd_pd(_mm256_mul_pd(r2, r2), hi, tmp);
  const __m256d scale = _mm256_castsi256_pd(scale_bits);
  return _mm256_fmadd_pd(scale, tmp, scale);
}

}  // namespace

void exp_shifted_scaled_f64_avx2(const float* x, int64_t n, double shift, double scale,
                                 double* out) {
  const __m256d vshift = _mm256_set1_pd(shift), vscale = _mm256_set1_pd(scale);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
  const __m256d tiny = _mm256_set1_pd(0x1p-54), big = _mm256_set1_pd(512.0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d y =
        _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vshift), vscale);
    const __m256d ay = _mm256_and_pd(y, abs_mask);
    // In range: tiny <= |y| < 512 (false for NaN).
    const __m256d ok =
        _mm256_and_pd(_mm256_cmp_pd(ay, tiny, _CMP_GE_OQ), _mm256_cmp_pd(ay, big, _CMP_LT_OQ));
    _mm256_storeu_pd(out + i, exp_f64x4(y));
    const int ok_mask = _mm256_movemask_pd(ok);
    if (ok_mask != 0xf) {
      for (int j = 0; j < 4; ++j) {
        if ((ok_mask & (1 << j)) == 0)
          out[i + j] = __builtin_exp((static_cast<double>(x[i + j]) - shift) * scale);
      }
    }
  }
  for (; i < n; ++i) out[i] = __builtin_exp((static_cast<double>(x[i]) - shift) * scale);
}

void gelu_table_mul_f32_avx2(float* gate, const float* up, int64_t n, const float* table) {
  // F16C's round-to-nearest-even conversion gives the scalar fp32_to_fp16's bits (subnormals,
  // overflow to inf and NaN included); the index is gathered unsigned from the low half-words.
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 g = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
  }
  if (i < n) gelu_table_mul_f32_scalar(gate + i, up + i, n - i, table);
}

float max_f32_avx2(const float* x, int64_t n) {
  // Four independent max chains (one would wait on max_ps's latency every 8 entries) and an
  // unordered-compare mask that remembers any NaN.
  __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
    m0 = _mm256_max_ps(m0, a);
    m1 = _mm256_max_ps(m1, b);
    m2 = _mm256_max_ps(m2, c);
    m3 = _mm256_max_ps(m3, d);
    nan = _mm256_or_ps(
        nan, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, d, _CMP_UNORD_Q)));
  }
  if (_mm256_movemask_ps(nan) != 0) return __builtin_nanf("");
  alignas(32) float lanes[32];
  _mm256_store_ps(lanes, m0);
  _mm256_store_ps(lanes + 8, m1);
  _mm256_store_ps(lanes + 16, m2);
  _mm256_store_ps(lanes + 24, m3);
  float m = -__builtin_inff();
  for (float l : lanes) m = l > m ? l : m;
  for (; i < n; ++i) {
    if (x[i] != x[i]) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

int64_t argmax_f32_avx2(const float* x, int64_t n) {
  // The maximum over the non-NaN entries (max_ps returns its second operand when the first is
  // NaN), then the first index holding it: the scalar loop's answer in two vector passes.
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(x + i), vmax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = -__builtin_inff();
  for (float l : lanes) m = l > m ? l : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  const __m256 vm = _mm256_set1_ps(m);
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
    if (eq != 0) return i + __builtin_ctz(static_cast<unsigned>(eq));
  }
  for (; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return n - 1;  // every entry NaN
}

void fp16_to_fp32_row_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) {
    dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(src[i])));
  }
}

void fp32_to_fp16_row_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    dst[i] = static_cast<uint16_t>(
        _mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT)));
  }
}

}  // namespace specdec
