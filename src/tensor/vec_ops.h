// Float vector primitives for attention (q.k scores, probability-weighted V sums) and the FFN
// gate, with the instruction set chosen at run time like the matmul kernels. Each result depends
// only on its inputs and the active path, never on what else is computed, so the forward pass
// stays batch invariant.
#pragma once

#include <cstdint>

namespace specdec {

// sum_i a[i] * b[i].
float dot_f32(const float* a, const float* b, int64_t n);

// y[i] += alpha * x[i].
void axpy_f32(float alpha, const float* x, float* y, int64_t n);

// Attention over n_rows cache rows at a fixed stride (floats), in one call so the per-call
// dispatch and loop set-up are paid once per query head, not once per cache row:
// out[s] = dot_f32(q, rows + s * stride, dim) for s < n_rows;
void dot_rows_f32(const float* q, const float* rows, int64_t stride, int64_t n_rows, int64_t dim,
                  float* out);
// and out[d] += p[s] * rows[s * stride + d], summed over s = 0, 1, ... in order, exactly as
// n_rows calls of axpy_f32 would.
void weighted_sum_rows_f32(const float* p, const float* rows, int64_t stride, int64_t n_rows,
                           int64_t dim, float* out);

// Several queries against the same rows, so each row is loaded once per few queries instead
// of once per query (grouped-query heads share their keys and values). Each result equals the
// one-query form bit for bit, whatever nq is:
// out[j * out_stride + s] = dot_f32(q + j * q_stride, rows + s * stride, dim), j < nq, s < n_rows;
void dot_rows_multi_f32(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                        int64_t stride, int64_t n_rows, int64_t dim, float* out,
                        int64_t out_stride);
// and weighted_sum_rows_f32(p + j * p_stride, rows, stride, n_rows, dim, out + j * out_stride)
// for each j < nq (every query over the same n_rows rows).
void weighted_sum_rows_multi_f32(const float* p, int64_t p_stride, int64_t nq, const float* rows,
                                 int64_t stride, int64_t n_rows, int64_t dim, float* out,
                                 int64_t out_stride);

// Attention's softmax numerator in place: row[i] = exp(scale * row[i] - max_j scale * row[j])
// with exp exactly std::exp (the AVX2 path runs glibc's expf algorithm in double, 4 lanes at a
// time, which gives its bits for every argument <= 0, the only ones that occur here); returns
// the sum of the results, added in index order. n >= 1.
float softmax_exp_f32(float* row, int64_t n, float scale);

// out[i] = std::exp((double(x[i]) - shift) * scale), bit for bit on both paths (the AVX2 one runs
// glibc's double exp algorithm 4 lanes at a time and hands the rare special arguments, |y| below
// 2^-54 or at least 512 and NaN, to std::exp). Sampling's softmax weights over a vocabulary.
void exp_shifted_scaled_f64(const float* x, int64_t n, double shift, double scale, double* out);

// gate[i] = f(gate[i]) * up[i] with ggml's table GELU: f(x) = 0 for x <= -10, x for x >= 10,
// else table[fp16 bits of x] (x rounded to nearest-even fp16; table: 65536 entries). The AVX2
// path converts with F16C and gathers from the table: the same bits as the scalar loop.
void gelu_table_mul_f32(float* gate, const float* up, int64_t n, const float* table);

// The maximum of x[0..n), or NaN if any entry is NaN (sampling checks its logits with it). The
// maximum does not depend on the order of comparisons (+0 and -0 aside, which compare equal),
// so both paths agree. n >= 1.
float max_f32(const float* x, int64_t n);

// Index of the first maximum of x[0..n), NaNs skipped (n - 1 when every entry is NaN): greedy
// decoding's argmax over a vocabulary. Both paths give the same index. n >= 1.
int64_t argmax_f32(const float* x, int64_t n);

// Fast exp: clamps x to [-87.3, 88] (so results never overflow; below the range they stay at
// about 1.2e-38 instead of reaching 0), then e^x = 2^n * p(r) with a degree-6 polynomial,
// within 2 ulp. Scalar and AVX2 versions run the same operations (fused multiply-adds
// included), so both paths give identical bits.
float exp_f32(float x);
// gate[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + exp_f32(-g)) (SwiGLU's gate).
void silu_mul_f32(float* gate, const float* up, int64_t n);

// fp16 rows (an f16 KV cache): dst[i] = the float of src[i], exact; and src rounded to the
// nearest-even fp16 (as F16C's converters round; NaNs stay NaNs). The AVX2 and AVX-512 paths use
// F16C and give the scalar bits.
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

// Scalar and AVX2 versions (the AVX2 ones only when cpu_has_avx2()); exposed for tests.
void fp16_to_fp32_row_avx2(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row_avx2(const float* src, uint16_t* dst, int64_t n);
float dot_f32_scalar(const float* a, const float* b, int64_t n);
void axpy_f32_scalar(float alpha, const float* x, float* y, int64_t n);
float dot_f32_avx2(const float* a, const float* b, int64_t n);
void axpy_f32_avx2(float alpha, const float* x, float* y, int64_t n);
void silu_mul_f32_avx2(float* gate, const float* up, int64_t n);
void dot_rows_f32_avx2(const float* q, const float* rows, int64_t stride, int64_t n_rows,
                       int64_t dim, float* out);
void weighted_sum_rows_f32_avx2(const float* p, const float* rows, int64_t stride, int64_t n_rows,
                                int64_t dim, float* out);
float softmax_exp_f32_scalar(float* row, int64_t n, float scale);
int64_t argmax_f32_scalar(const float* x, int64_t n);
float max_f32_scalar(const float* x, int64_t n);
void gelu_table_mul_f32_scalar(float* gate, const float* up, int64_t n, const float* table);
void gelu_table_mul_f32_avx2(float* gate, const float* up, int64_t n, const float* table);
float max_f32_avx2(const float* x, int64_t n);
int64_t argmax_f32_avx2(const float* x, int64_t n);
void exp_shifted_scaled_f64_scalar(const float* x, int64_t n, double shift, double scale,
                                   double* out);
void exp_shifted_scaled_f64_avx2(const float* x, int64_t n, double shift, double scale,
                                 double* out);
float softmax_exp_f32_avx2(float* row, int64_t n, float scale);
void dot_rows_multi_f32_avx2(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                             int64_t stride, int64_t n_rows, int64_t dim, float* out,
                             int64_t out_stride);
void weighted_sum_rows_multi_f32_avx2(const float* p, int64_t p_stride, int64_t nq,
                                      const float* rows, int64_t stride, int64_t n_rows,
                                      int64_t dim, float* out, int64_t out_stride);
// The AVX-512 forms (only when cpu_has_avx512_vnni()): the same bits, each cache row read once
// per 6 queries (scores) or per 3 queries and 128 columns (weighted sums).
void dot_rows_multi_f32_avx512(const float* q, int64_t q_stride, int64_t nq, const float* rows,
                               int64_t stride, int64_t n_rows, int64_t dim, float* out,
                               int64_t out_stride);
void weighted_sum_rows_multi_f32_avx512(const float* p, int64_t p_stride, int64_t nq,
                                        const float* rows, int64_t stride, int64_t n_rows,
                                        int64_t dim, float* out, int64_t out_stride);

}  // namespace specdec
