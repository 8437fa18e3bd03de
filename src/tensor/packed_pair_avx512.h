// What the 16-row ("pair") packed kernels share: both K-quant (packed_dot_k16_avx512.cpp) and
// 32-column (packed_dot16_avx512.cpp) forms read two adjacent 8-row groups per call, group a's 8
// rows in the low zmm lanes and group b's in the high ones.
//
// Only for *_avx512.cpp files: everything is in an unnamed namespace, so each translation unit
// gets its own copy compiled with its own instruction sets (as packed_dot_x86.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace specdec {
namespace {

// As in packed_dot_k_avx512.cpp: the activation bytes as the embedded broadcast ({1to16}),
// which GCC 12 does not fold into vpdpbusd by itself.
inline __m512i dpbusd_bcast(__m512i acc, __m512i q, const void* y) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(q), "m"(*static_cast<const int*>(y)));
  return acc;
}

// Group a's 8 lanes, then group b's.
inline __m512i join(__m256i a, __m256i b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
inline __m512i load_pair(const void* a, const void* b) {
  return join(_mm256_loadu_si256(static_cast<const __m256i*>(a)),
              _mm256_loadu_si256(static_cast<const __m256i*>(b)));
}
// The 16 fp16 values of both groups (a's 8, then b's) as floats.
inline __m512 halfs_pair(const uint16_t* a, const uint16_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}
// One 32-byte load of each group's 4-bit codes split into its two chunks: lo gets the low
// nibbles, hi the high ones, each as bytes in [0, 16).
inline void unpack_nibbles_pair(const uint8_t* a, const uint8_t* b, __m512i& lo, __m512i& hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i raw = load_pair(a, b);
  lo = _mm512_and_si512(raw, low4);
  hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
}

// About 6 vpdpbusd in flight (a 512-bit one's latency over its issue interval; 6 measured a
// little ahead of 4 and 8 on Zen 4, within this VM's noise).
constexpr int kInFlight = 6;

// Prefetch for the two streams a pair reads (group a's blocks and group b's, nb blocks apart),
// about 4 KiB ahead in each, where "ahead" past a group's last block is the same group of the
// next pair (2 nb blocks on), into L2 (_MM_HINT_T1). Into L1, as the 8-row kernels ask, the
// two streams ran at half speed: a 65536 x 1536 Q4_K pass over 5 rows took 6.7-7.7 ms against
// the 8-row kernel's 5.0 and this one's 3.2-3.7 (one thread; following the streams into the
// next pair alone did not help). Prefetching past the matrix's end is harmless.
template <typename P>
inline void prefetch_pair(const P* wa, const P* wb, int64_t nb, int64_t i) {
  constexpr int64_t kAhead = (4096 + sizeof(P) - 1) / sizeof(P);
  const int64_t j = i + kAhead, skip = j < nb ? 0 : nb;
  const char* a = reinterpret_cast<const char*>(wa + j + skip);
  const char* b = reinterpret_cast<const char*>(wb + j + skip);
  for (size_t off = 0; off < sizeof(P); off += 64) {
    _mm_prefetch(a + off, _MM_HINT_T1);
    _mm_prefetch(b + off, _MM_HINT_T1);
  }
}

}  // namespace
}  // namespace specdec
