// The packed K-quant kernels on AMX-INT8 tiles: four adjacent 8-row groups (32 weight rows) per
// call against any number of activation rows, 16 at a time, for prefills and wide batched passes.
//
// Why: from a few activation rows on, a pass over the Q4_K/Q6_K matrices is bound by the VNNI
// multiply-adds (one 512-bit vpdpbusd a cycle on port 0 of an Intel core), not by memory. One
// tile multiply (tdpbsud) does 16 x 16 x 64 byte products, 64 vpdpbusd's worth, in about 16
// cycles on the matrix unit, beside the vector ports.
//
// Exactness: every output is the same bits as the VNNI and scalar kernels'
// (packed_dot_k_scalar.cpp) because the integers are the same. A tile multiply sums over its 64
// columns at once, so a sub-block's 6-bit (Q4_K/Q5_K) or 8-bit (Q6_K) scale cannot be applied after
// the sum the way the VNNI kernels apply it; it is folded into the weights instead, split into
// digits small enough that digit x code fits the unsigned byte tdpbsud multiplies:
//   Q4_K/Q5_K: sc = 8 hi + lo (lo, hi in [0, 8)): sumi = C(q lo) + 8 C(q hi) (q < 32, so
//     q x 7 < 256); the min term summ is the VNNI kernels' (mins times the activations'
//     bsums32, four vpdpwssd a row), which costs the vector ports less than a third tile
//     product (a folded copy of the mins) cost the tile unit and the stores;
//   Q6_K: sc + 128 = sum_e 4^e d_e (d_e in [0, 4)): sum y q sc = sum_e 4^e C(q d_e) - 128 C(q)
//     (q < 64, so q x 3 < 256), and the -32 offset is the VNNI kernels' bsums term;
// where C(v) is the tile sum of activation x v over the super-block. All are exact int32 sums
// (at most 256 x 217 x 128 in magnitude), equal to the VNNI kernels' sumi whatever the order;
// the float steps after them are PackedK16's (packed_dot_k16_avx512.cpp) lane for lane, so a
// row's output does not depend on which kernel or how many activation rows computed it.
//
// Compiled with AVX-512 F/BW/VL/VNNI plus AMX-TILE/AMX-INT8; only reached after
// cpu_has_amx_int8() (cpu_features.h), which checks that the kernel granted this process the
// tile state and that amx_tile_probe() below gives the right answer.
// GCC 12's 512-bit intrinsics without a mask start from _mm512_undefined_*(), which it then
// reports at inlined uses as maybe-uninitialized or, once the buffers below are plain pointers,
// uninitialized (GCC bug 105593, fixed in GCC 13; see packed_dot_k16_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_dot_k_x86.h"
#include "tensor/packed_k_pair_avx512.h"
#include "tensor/packed_pair_avx512.h"
#include "tensor/packed_weights.h"

namespace specdec {
namespace {

// Rows of every tile (activation rows, or 4-column groups of weights) and its bytes: the tiled
// activations' shape (packed_weights.h).
constexpr int kTile = kActTileRows;
constexpr int kTileBytes = kActTileRows * kActTileSliceBytes;
constexpr int kSlices = kQK_K / kActTileSliceBytes;  // tile multiplies per super-block

// Every tile is 16 rows x 64 bytes, so one configuration serves all kernels and is loaded once
// per thread (which tiles hold sums, activations and weights: tile_sums).
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  alignas(64) TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = kTile;
  }
  _tile_loadconfig(&c);
}

void ensure_tiles_configured() {
  thread_local bool configured = false;
  if (!configured) {
    configure_tiles();
    configured = true;
  }
}

// Per-thread buffers (amx_scratch slots): the folded weights (B tiles) of two super-blocks, the
// stored tile sums of two groups of activation rows, and the rows' accumulators.
enum ScratchSlot { kFoldedSlot = 0, kSumsSlot = 1, kAccSlot = 2 };

// Word-wise multiply of bytes by a per-lane digit: each 16-bit word holds two codes and each
// product is below 256, so no carry crosses a byte and vpmullw gives the bytes' products.
inline __m512i times_digit(__m512i q, __m512i digit_words) {
  return _mm512_mullo_epi16(q, digit_words);
}
// A 32-bit lane value (below 2^16) in both of the lane's 16-bit words.
inline __m512i in_both_words(__m512i v) { return _mm512_or_si512(v, _mm512_slli_epi32(v, 16)); }

// Rows t0 .. t0 + 15 of the activations (their scales and sums; the codes come from the tiled
// copy).
struct ActRows {
  const uint8_t* base;
  size_t stride;
};

inline const PackedActBlockK& act_block(const ActRows& r, int m, int64_t i) {
  return reinterpret_cast<const PackedActBlockK*>(r.base + static_cast<size_t>(m) * r.stride)[i];
}

// The tile sums of one super-block for 16 activation rows (a: their tiled codes), C = A x B
// over its 4 slices for every folded weight copy B, stored to sums (16 x 16 int32 each, in the
// copies' order). Q4_K/Q5_K: two pairs of 8-row groups x two copies in tiles 0..3, so that
// each activation tile loaded serves 32 weight rows (loading the activation tiles was the
// largest cost with 16); Q6_K: one pair's five copies in tiles 0..4.
// The two branches are written out: GCC's AMX intrinsics paste the tile number into the asm text
// (amxtileintrin.h: "%%tmm"#dst), so it must be a literal token, not a template argument, loop
// index or expression that one shared body could compute.
template <int kParts>
inline void tile_sums(const uint8_t* a, const uint8_t* folded, int32_t* sums) {
  constexpr long kStride = 64;
  constexpr int kCopy = kSlices * kTileBytes;
  if constexpr (kParts == 2) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int s = 0; s < kSlices; ++s) {
      _tile_loadd(4, a + s * kTileBytes, kStride);
      const uint8_t* b = folded + s * kTileBytes;
      _tile_loadd(5, b, kStride);
      _tile_dpbsud(0, 4, 5);
      _tile_loadd(6, b + kCopy, kStride);
      _tile_dpbsud(1, 4, 6);
      _tile_loadd(5, b + 2 * kCopy, kStride);
      _tile_dpbsud(2, 4, 5);
      _tile_loadd(6, b + 3 * kCopy, kStride);
      _tile_dpbsud(3, 4, 6);
    }
    _tile_stored(0, sums, kStride);
    _tile_stored(1, sums + kTile * kTile, kStride);
    _tile_stored(2, sums + 2 * kTile * kTile, kStride);
    _tile_stored(3, sums + 3 * kTile * kTile, kStride);
  } else {
    static_assert(kParts == 5);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    for (int s = 0; s < kSlices; ++s) {
      _tile_loadd(5, a + s * kTileBytes, kStride);
      const uint8_t* b = folded + s * kTileBytes;
      _tile_loadd(6, b, kStride);
      _tile_dpbsud(0, 5, 6);
      _tile_loadd(7, b + kCopy, kStride);
      _tile_dpbsud(1, 5, 7);
      _tile_loadd(6, b + 2 * kCopy, kStride);
      _tile_dpbsud(2, 5, 6);
      _tile_loadd(7, b + 3 * kCopy, kStride);
      _tile_dpbsud(3, 5, 7);
      _tile_loadd(6, b + 4 * kCopy, kStride);
      _tile_dpbsud(4, 5, 6);
    }
    _tile_stored(0, sums, kStride);
    _tile_stored(1, sums + kTile * kTile, kStride);
    _tile_stored(2, sums + 2 * kTile * kTile, kStride);
    _tile_stored(3, sums + 3 * kTile * kTile, kStride);
    _tile_stored(4, sums + 4 * kTile * kTile, kStride);
  }
}

inline __m512i c_row(const int32_t* sums, int part, int m) {
  return _mm512_load_si512(sums + kTile * (kTile * part + m));
}

// Where chunk k (0..7) of 32-column unit u (0..7: a Q4_K sub-block or a Q6_K group) of copy
// `part` goes in the folded super-block: slice u / 2, tile row 8 (u % 2) + k.
inline uint8_t* folded_row(uint8_t* folded, int part, int u, int k) {
  return folded + (part * kSlices + u / 2) * kTileBytes + (8 * (u % 2) + k) * 64;
}

template <typename P, bool kFive>
struct TilesQ45 {
  static constexpr int kParts = 2, kPairs = 2;
  static void fold(const P& a, const P& b, const KScalesPair& s, uint8_t* folded) {
    const __m512i low3 = _mm512_set1_epi32(7);
    for (int j = 0; j < 8; ++j) {
      __m512i q[8];
      unpack_sub_block<P, kFive>(a, b, j, q);
      const __m512i sc = byte_to_dword(j < 4 ? s.sc_lo : s.sc_hi, j % 4);
      const __m512i lo = in_both_words(_mm512_and_si512(sc, low3));
      const __m512i hi = in_both_words(_mm512_srli_epi32(sc, 3));
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        _mm512_store_si512(folded_row(folded, 0, j, k), times_digit(q[k], lo));
        _mm512_store_si512(folded_row(folded, 1, j, k), times_digit(q[k], hi));
      }
    }
  }
};

struct TilesQ6 {
  static constexpr int kParts = 5, kPairs = 1;
  static void fold(const PackedQ6_Kx8& a, const PackedQ6_Kx8& b, uint8_t* folded) {
    const __m512i bias = _mm512_set1_epi16(128), low16 = _mm512_set1_epi32(0xffff);
    const __m512i two_bits = _mm512_set1_epi16(3);
    for (int g = 0; g < 8; ++g) {
      __m512i q[8];
      unpack_q6_group(a, b, g, q);
      // sc + 128 of sub-blocks 2g (chunks 0..3) and 2g + 1 (chunks 4..7), in [0, 256).
      const __m512i biased = _mm512_add_epi16(q6_scale_pairs(a, b, g), bias);
      const __m512i sub[2] = {in_both_words(_mm512_and_si512(biased, low16)),
                              in_both_words(_mm512_srli_epi32(biased, 16))};
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        __m512i digit[4];
#pragma GCC unroll 4
        for (int d = 0; d < 4; ++d) {
          digit[d] = _mm512_and_si512(_mm512_srli_epi16(sub[e], 2 * d), two_bits);
        }
#pragma GCC unroll 4
        for (int k = 4 * e; k < 4 * e + 4; ++k) {
#pragma GCC unroll 4
          for (int d = 0; d < 4; ++d) {
            _mm512_store_si512(folded_row(folded, d, g, k), times_digit(q[k], digit[d]));
          }
          _mm512_store_si512(folded_row(folded, 4, g, k), q[k]);
        }
      }
    }
  }
};

// Per super-block, what the float steps need besides the tile sums: both groups' d (and dmin)
// as floats, and the Q6_K scales as int16 pairs (for the -32 offset's bsums term).
struct BlockScales {
  __m512 dw, dm;
  // Q6_K: q6_scale_pairs 0..7; Q4_K/Q5_K: min_pair_words 0..3, the sub-blocks' mins in pairs
  // for the min term (the VNNI kernels' summ, from the activations' bsums32).
  __m512i pairs[8];
};

// One super-block's folded weights and scales.
template <typename P, typename Kind>
inline void fold_block(const P& a, const P& b, uint8_t* folded, BlockScales& bs) {
  bs.dw = halfs_pair(a.d, b.d);
  if constexpr (Kind::kParts == 2) {
    const KScalesPair sc(a.scales, b.scales);
    Kind::fold(a, b, sc, folded);
    bs.dm = halfs_pair(a.dmin, b.dmin);
#pragma GCC unroll 4
    for (int qq = 0; qq < 4; ++qq) bs.pairs[qq] = min_pair_words(sc, qq);
  } else {
    Kind::fold(a, b, folded);
    bs.dm = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) bs.pairs[g] = q6_scale_pairs(a, b, g);
  }
}

// The float steps of PackedK16 for activation rows m < rows of one group, one pair and
// super-block i, from its stored tile sums c, into acc (16 floats of each row, acc_stride apart).
template <typename Kind>
inline void add_block(const ActRows& r, int rows, int64_t i, const int32_t* c,
                      const BlockScales& bs, float* acc, int64_t acc_stride) {
  constexpr bool kMin = Kind::kParts == 2;
  for (int m = 0; m < rows; ++m) {
    const PackedActBlockK& y = act_block(r, m, i);
    __m512i sumi, summ = _mm512_setzero_si512();
    if constexpr (kMin) {
      sumi = _mm512_add_epi32(c_row(c, 0, m), _mm512_slli_epi32(c_row(c, 1, m), 3));
#pragma GCC unroll 4
      for (int qq = 0; qq < 4; ++qq) summ = dpwssd_bcast(summ, bs.pairs[qq], y.bsums32 + 2 * qq);
    } else {
      __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) off = dpwssd_bcast(off, bs.pairs[g], y.bsums + 2 * g);
      sumi = _mm512_add_epi32(c_row(c, 0, m), _mm512_slli_epi32(c_row(c, 1, m), 2));
      sumi = _mm512_add_epi32(sumi, _mm512_slli_epi32(c_row(c, 2, m), 4));
      sumi = _mm512_add_epi32(sumi, _mm512_slli_epi32(c_row(c, 3, m), 6));
      sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(c_row(c, 4, m), 7));
      sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(off, 5));
    }
    const __m512 yd = _mm512_set1_ps(y.d);
    __m512 a = _mm512_loadu_ps(acc + acc_stride * m);
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(bs.dw, yd), a);
    if constexpr (kMin) {
      a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(bs.dm, yd), a);
    }
    _mm512_storeu_ps(acc + acc_stride * m, a);
  }
}

// The driver shared by the kinds for Kind::kPairs pairs of 8-row groups at a time, a software
// pipeline: per super-block i, each group of 16 activation rows has its tile sums issued, then
// the float steps of the group before it run; the folding of super-block i + 1 (which streams
// its weights from memory while the tile unit works) comes before the last group's float steps.
// So every load reads data stored a whole step earlier: a tile load of weights folded just
// before, or a vector load of a tile just stored, waits for the store, and on the Intel Xeon VM
// the first version, folding each super-block just before its multiplies and reading each tile
// right after storing it, ran no faster than the VNNI kernel.
template <typename P, typename Kind>
void tiles_pass(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, const uint8_t* tiled,
                int64_t nx, float* out, int64_t os) {
  constexpr int kPairs = Kind::kPairs, kWidth = kTile * kPairs;  // weight rows of the pass
  constexpr size_t kFoldedPair = static_cast<size_t>(Kind::kParts) * kSlices * kTileBytes;
  constexpr size_t kFoldedBlock = kFoldedPair * kPairs;
  constexpr int64_t kSumsPair = int64_t{Kind::kParts} * kTile * kTile;
  constexpr int64_t kSumsBlock = kSumsPair * kPairs;
  ensure_tiles_configured();
  const int64_t nb = n / kQK_K;
  // Pair p's two groups start 2 p nb blocks in.
  const P* pa[kPairs];
  const P* pb[kPairs];
  for (int p = 0; p < kPairs; ++p) {
    pa[p] = reinterpret_cast<const P*>(w) + 2 * p * nb;
    pb[p] = pa[p] + nb;
  }
  const int64_t groups = (nx + kTile - 1) / kTile;
  uint8_t* folded = amx_scratch(kFoldedSlot, 2 * kFoldedBlock);
  auto* sums = reinterpret_cast<int32_t*>(
      amx_scratch(kSumsSlot, sizeof(int32_t) * static_cast<size_t>(2 * kSumsBlock)));
  const size_t acc_bytes = sizeof(float) * static_cast<size_t>(nx * kWidth);
  auto* acc = reinterpret_cast<float*>(amx_scratch(kAccSlot, acc_bytes));
  std::memset(acc, 0, acc_bytes);  // 0.0f
  BlockScales scales[2][kPairs];
  auto fold = [&](int64_t i) {
    uint8_t* f = folded + kFoldedBlock * static_cast<size_t>(i % 2);
    for (int p = 0; p < kPairs; ++p) {
      prefetch_pair(pa[p], pb[p], nb, i);
      fold_block<P, Kind>(pa[p][i], pb[p][i], f + kFoldedPair * p, scales[i % 2][p]);
    }
  };
  auto add_group = [&](int64_t i, int64_t g) {
    const int rows = static_cast<int>(std::min<int64_t>(kTile, nx - g * kTile));
    const ActRows r{x + static_cast<size_t>(g * kTile) * xs, xs};
    const int32_t* c = sums + kSumsBlock * (g % 2);
    for (int p = 0; p < kPairs; ++p) {
      add_block<Kind>(r, rows, i, c + kSumsPair * p, scales[i % 2][p],
                      acc + g * kTile * kWidth + kTile * p, kWidth);
    }
  };
  fold(0);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* f = folded + kFoldedBlock * static_cast<size_t>(i % 2);
    // Group g's float steps run after group g + 1's tile sums are issued, so that they read
    // tiles stored a whole group earlier; the last group's wait behind the next fold.
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* a = tiled + static_cast<size_t>((g * nb + i) * kSlices * kTileBytes);
      tile_sums<Kind::kParts>(a, f, sums + kSumsBlock * (g % 2));
      if (g > 0) add_group(i, g - 1);
    }
    if (i + 1 < nb) fold(i + 1);
    add_group(i, groups - 1);
  }
  for (int64_t t = 0; t < nx; ++t) {
    for (int p = 0; p < kPairs; ++p) {
      _mm512_storeu_ps(out + t * os + kTile * p, _mm512_loadu_ps(acc + t * kWidth + kTile * p));
    }
  }
}

std::atomic<uint64_t> g_tile_calls{0};

// A call covers 32 weight rows (four 8-row groups): one pass of two pairs, or two of one.
template <typename P, typename Kind>
void tiles_run(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, const uint8_t* tiled,
               int64_t nx, float* out, int64_t os) {
  g_tile_calls.fetch_add(1, std::memory_order_relaxed);
  constexpr int kPasses = 2 / Kind::kPairs;
  const size_t pass_bytes = static_cast<size_t>(2 * Kind::kPairs * (n / kQK_K)) * sizeof(P);
  for (int q = 0; q < kPasses; ++q) {
    tiles_pass<P, Kind>(n, w + q * pass_bytes, x, xs, tiled, nx, out + q * kTile * Kind::kPairs,
                        os);
  }
}

template <typename P, bool kFive>
void tiles_q45(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, const uint8_t* tiled,
               int64_t nx, float* out, int64_t os) {
  tiles_run<P, TilesQ45<P, kFive>>(n, w, x, xs, tiled, nx, out, os);
}

void tiles_q6(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, const uint8_t* tiled,
              int64_t nx, float* out, int64_t os) {
  tiles_run<PackedQ6_Kx8, TilesQ6>(n, w, x, xs, tiled, nx, out, os);
}

}  // namespace

const TileKKernelTable& packed_k_tile_kernels_amx() {
  static constexpr TileKKernelTable kTable = {
      tiles_q45<PackedQ4_Kx8, false>,
      tiles_q45<PackedQ5_Kx8, true>,
      tiles_q6,
  };
  return kTable;
}

uint64_t amx_tile_calls() { return g_tile_calls.load(std::memory_order_relaxed); }

bool amx_tile_probe() {
  configure_tiles();
  alignas(64) int8_t a[kTile * 64];
  alignas(64) uint8_t b[kTile * 64];
  alignas(64) int32_t c[kTile * kTile];
  for (int i = 0; i < kTile * 64; ++i) {
    a[i] = static_cast<int8_t>(i % 7 - 3);
    b[i] = static_cast<uint8_t>(i % 251);
  }
  _tile_zero(0);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_dpbsud(0, 5, 6);
  _tile_stored(0, c, 64);
  _tile_release();
  // C[m][n] = sum over k < 16, e < 4 of A[m][4k + e] x B[k][4n + e].
  for (int m = 0; m < kTile; ++m) {
    for (int nn = 0; nn < kTile; ++nn) {
      int32_t want = 0;
      for (int k = 0; k < kTile; ++k) {
        for (int e = 0; e < 4; ++e) want += a[64 * m + 4 * k + e] * b[64 * k + 4 * nn + e];
      }
      if (c[kTile * m + nn] != want) return false;
    }
  }
  return true;
}

}  // namespace specdec
