// AVX2/F16C activation quantizers. They must give the same bytes as the scalar versions in
// act_quant.cpp (tested): same scale formulas, x * id then round-half-even (the default MXCSR
// mode, like std::nearbyint), fp16 via F16C (round-to-nearest-even, like fp32_to_fp16).
#include <immintrin.h>

#include "tensor/act_quant.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"
#include "tensor/quant_blocks.h"

namespace specdec {
namespace {

inline uint16_t f2h(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Rounds 32 floats times `scale` to int8 (in order) at dst; values must fit in [-128, 127].
inline __m256i round_pack32(const float* x, __m256 scale) {
  __m256i v[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v[k] = _mm256_cvtps_epi32(r);
  }
  // packs work per 128-bit lane; the final permute restores element order.
  const __m256i a = _mm256_packs_epi32(v[0], v[1]);
  const __m256i b = _mm256_packs_epi32(v[2], v[3]);
  const __m256i c = _mm256_packs_epi16(a, b);
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline int hsum_i8(__m256i q) {
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
  const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// amax of 32 floats.
inline float amax32(const float* x) {
  __m256 m = abs_ps(_mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * k)));
  return hmax8(m);
}

}  // namespace

void quantize_act_q8_0_avx2(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = amax32(x);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f2h(amax / 127.0f);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), round_pack32(x, _mm256_set1_ps(id)));
  }
}

void quantize_act_q8_1_avx2(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = amax32(x);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float d = amax / 127.0f;
    const __m256i q = round_pack32(x, _mm256_set1_ps(id));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
    y[i].d = f2h(d);
    y[i].s = f2h(d * static_cast<float>(hsum_i8(q)));
  }
}

void quantize_act_q8_k_avx2(const float* x, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + k)));
    const float amax = hmax8(m);
    if (amax == 0.0f) {
      __builtin_memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The signed value of the first element with the largest magnitude (as the scalar scan),
    // 8 elements per compare (element by element it took 2-3 % of a prefill).
    float max = 0.0f;
    const __m256 target = _mm256_set1_ps(amax);
    for (int k = 0; k < kQK_K; k += 8) {
      const __m256 hit = _mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + k)), target, _CMP_EQ_OQ);
      const int lanes = _mm256_movemask_ps(hit);
      if (lanes != 0) {
        max = x[k + __builtin_ctz(static_cast<unsigned>(lanes))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    // |iscale * x| <= 127 except for rounding of the extreme value, so clamp at 127 like
    // the scalar code (the negative side cannot go below -127).
    const __m256 scale = _mm256_set1_ps(iscale);
    for (int g = 0; g < kQK_K / 32; ++g) {
      __m256i q = round_pack32(x + 32 * g, scale);
      q = _mm256_min_epi8(q, _mm256_set1_epi8(127));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * g), q);
      // bsums for the two 16-element halves of this group.
      const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
      const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));  // 8 x (4 elements)
      const __m256i s64 = _mm256_hadd_epi32(s32, s32);  // per lane: [a0+a1, a2+a3, ...]
      const __m256i s128 = _mm256_hadd_epi32(s64, s64);
      y[i].bsums[2 * g] = static_cast<int16_t>(_mm256_extract_epi32(s128, 0));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(_mm256_extract_epi32(s128, 4));
    }
    y[i].d = 1.0f / iscale;
  }
}

void quantize_act_f16_avx2(const float* x, uint8_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = f2h(x[i]);
    __builtin_memcpy(dst + 2 * i, &h, 2);
  }
}

void widen_activation_row_avx2(bool q8_1, const uint8_t* src, uint8_t* dst, int64_t n) {
  const size_t src_block = q8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  const size_t hdr = q8_1 ? 4 : 2;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* in = src + static_cast<size_t>(b) * src_block;
    PackedActBlock out;
    uint16_t h;
    __builtin_memcpy(&h, in, 2);
    out.d = _cvtsh_ss(h);  // fp16 -> fp32 is exact, as in fp16_to_fp32
    out.s = 0.0f;
    if (q8_1) {
      __builtin_memcpy(&h, in + 2, 2);
      out.s = _cvtsh_ss(h);
    }
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + hdr));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs), q);
    out.sum = hsum_i8(q);
    __builtin_memcpy(dst + static_cast<size_t>(b) * sizeof(PackedActBlock), &out, sizeof out);
  }
}

}  // namespace specdec
