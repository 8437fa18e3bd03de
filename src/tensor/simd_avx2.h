// Small AVX2/F16C helpers shared by the *_avx2.cpp and *_avx512.cpp kernel files, and only by
// them (they are compiled with -mavx2 -mfma -mf16c at least). Everything is in an unnamed
// namespace, so each translation unit gets its own copy and none can leak into baseline code
// (or AVX-512 code into the AVX2 path) through the linker.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace specdec {
namespace {

inline __m128 hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_add_ss(s, _mm_movehdup_ps(s));
}

// reduce8 of four accumulators at once, as [reduce8(a), reduce8(b), reduce8(c), reduce8(d)]:
// the same additions in the same order, two vectors wide.
// (vec_ops_avx2.cpp's reduce8 is the one-accumulator form.)
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

// 32 bits -> 32 bytes, byte j = 0x10 if bit j is set.
inline __m256i bits_to_0x10(uint32_t bits) {
  const __m256i b = _mm256_set1_epi32(static_cast<int>(bits));
  const __m256i spread =
      _mm256_shuffle_epi8(b, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                              2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The two fp16 fields at the start of a legacy block (d, then m for Q4_1/Q5_1 weights or s for
// Q8_1 activations) as floats in lanes 0 and 1, with one load and one conversion. For the
// formats without a second field lane 1 holds converted payload bytes and is never used.
inline __m128 h2f_pair(const void* block) {
  int bits;
  __builtin_memcpy(&bits, block, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
}

// One 32-byte load of a packed 4-bit block (packed_blocks.h) split into its two chunks: lo gets
// the low nibbles (chunk p), hi the high ones (chunk p + 4), each as bytes in [0, 16).
inline void unpack_nibbles(const uint8_t* p, __m256i& lo, __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  lo = _mm256_and_si256(raw, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
}

// 4 bytes at p repeated in all 8 lanes (one broadcast load).
inline __m256i broadcast4(const void* p) {
  int v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Asks for the weight bytes [p + kAhead, p + kAhead + n) in L1, one request per 64-byte line
// (stepping 64 from the first address touches every line a block can straddle, give or take
// the last). The kernels stream their weights once, front to back, and a decode step is a chain
// of short streams (a thread's slice of one matrix, a few hundred KiB); asking this far ahead
// keeps the loads ahead of the hardware prefetchers' ramp-up at each new stream. Measured on a
// 2-core Xeon VM (medians of 3 interleaved runs): decode step Gemma 3 270M 16.4 -> 14.0 ms,
// SmolLM2 7.7 -> 6.0 ms; 512 bytes ahead gained about half of that, 4 and 8 KiB no more than
// 2 KiB. Prefetching past a matrix's end is harmless. The packed K-quant kernels ask from 4 KiB
// ahead (packed_dot_k_x86.h: their blocks are 1152 to 1680 bytes, so 2 KiB is not even two
// blocks ahead).
template <size_t kAhead = 2048>
inline void prefetch_ahead(const void* p, size_t n) {
  const char* a = static_cast<const char*>(p) + kAhead;
  for (size_t off = 0; off < n; off += 64) _mm_prefetch(a + off, _MM_HINT_T0);
}

// The same into L2 only (_MM_HINT_T1), for the packed K-quant kernels when they multiply each
// weight block by several activation rows: there the integer work bounds the call, and with
// the lines asked into L1 the Q6_K kernel's loads stopped overlapping it on Zen 4. (The
// 32-column kernels measured slower with this hint and keep prefetch_ahead.)
template <size_t kAhead = 2048>
inline void prefetch_ahead_l2(const void* p, size_t n) {
  const char* a = static_cast<const char*>(p) + kAhead;
  for (size_t off = 0; off < n; off += 64) _mm_prefetch(a + off, _MM_HINT_T1);
}

// An empty asm that claims to modify v: the compiler must materialize v here and cannot
// reassociate a chain of integer adds across it. Without it GCC turns a per-row chain of adds
// into a wide tree whose temporaries spill to the stack.
inline void pin(__m256i& v) { asm("" : "+x"(v)); }

}  // namespace
}  // namespace specdec
