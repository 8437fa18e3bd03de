#include "tensor/packed_weights_k.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"

namespace specdec {
namespace {

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

constexpr uint32_t kLowNibbles = 0x0f0f0f0fu;

// 4 packed bytes of the 4-bit layout: low nibbles from nibble `hi` of the 4 bytes at a, high
// nibbles from nibble `hi` of the 4 bytes at b (byte-wise, so whole 32-bit words at a time).
uint32_t nibble_word(const uint8_t* a, const uint8_t* b, bool hi) {
  const uint32_t lo_src = hi ? load32(a) >> 4 : load32(a);
  const uint32_t hi_src = hi ? load32(b) >> 4 : load32(b);
  return (lo_src & kLowNibbles) | ((hi_src & kLowNibbles) << 4);
}

// Source column x (0..31) of chunk k, byte c (0..3) of a sub-block (packed_blocks.h).
int chunk_column(int k, int c) { return k < 4 ? 4 * k + c : 16 + 4 * (k - 4) + c; }

// Q4_K/Q5_K header and payload of row r. Sub-block j = 2c' + h of a source block is the low
// (h = 0) or high (h = 1) nibbles of qs[32c' .. 32c' + 31].
template <typename P, typename B>
void put_q45(P& p, int r, const B& b) {
  p.d[r] = b.d;
  p.dmin[r] = b.dmin;
  for (int w = 0; w < 3; ++w) std::memcpy(&p.scales[w][r], b.scales + 4 * w, 4);
  for (int j = 0; j < kQK_K / kQK; ++j) {
    const uint8_t* src = b.qs + 32 * (j / 2);
    for (int l = 0; l < 4; ++l) {
      const uint32_t v = nibble_word(src + 4 * l, src + 16 + 4 * l, j % 2 == 1);
      std::memcpy(&p.subs[j].qs[l][4 * r], &v, 4);
    }
  }
}

void put(PackedQ4_Kx8& p, int r, const BlockQ4_K& b) { put_q45(p, r, b); }

void put(PackedQ5_Kx8& p, int r, const BlockQ5_K& b) {
  put_q45(p, r, b);
  // The fifth bit of source column x of sub-block j is bit j of qh[x].
  for (int j = 0; j < kQK_K / kQK; ++j) {
    for (int c = 0; c < 4; ++c) {
      uint8_t byte = 0;
      for (int k = 0; k < 8; ++k) byte |= ((b.qh[chunk_column(k, c)] >> j) & 1u) << k;
      p.subs[j].qh[4 * r + c] = byte;
    }
  }
}

// Q6_K: group g = 4h + i is source elements 128h + 32i + [0, 32): low 4 bits in nibble i / 2
// of ql[64h + 32(i & 1) + l], top 2 bits at bit 2i of qh[32h + l].
void put(PackedQ6_Kx8& p, int r, const BlockQ6_K& b) {
  p.d[r] = b.d;
  for (int g = 0; g < kQK_K / kQK; ++g) {
    const int h = g / 4, i = g % 4;
    p.groups[g].scales[2 * r] = b.scales[2 * g];
    p.groups[g].scales[2 * r + 1] = b.scales[2 * g + 1];
    const uint8_t* ql = b.ql + 64 * h + 32 * (i & 1);
    for (int l = 0; l < 4; ++l) {
      const uint32_t v = nibble_word(ql + 4 * l, ql + 16 + 4 * l, i >= 2);
      std::memcpy(&p.groups[g].ql[l][4 * r], &v, 4);
    }
    const uint8_t* qh = b.qh + 32 * h;
    for (int u = 0; u < 2; ++u) {
      uint32_t v = 0;
      for (int k = 0; k < 4; ++k) {
        v |= ((load32(qh + 16 * u + 4 * k) >> (2 * i)) & 0x03030303u) << (2 * k);
      }
      std::memcpy(&p.groups[g].qh[u][4 * r], &v, 4);
    }
  }
}

template <typename P, typename B>
void pack_groups(const WeightMatrix& w, uint8_t* dst) {
  const int64_t nb = w.cols / kQK_K, groups = w.rows / kPackRows;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t s = 0; s < nb; ++s) {
      P p;
      std::memset(&p, 0, sizeof p);
      for (int r = 0; r < kPackRows; ++r) {
        B blk;
        std::memcpy(&blk,
                    w.data + static_cast<size_t>(g * kPackRows + r) * w.row_stride +
                        static_cast<size_t>(s) * sizeof(B),
                    sizeof blk);
        put(p, r, blk);
      }
      std::memcpy(dst + static_cast<size_t>(g * nb + s) * sizeof(P), &p, sizeof p);
    }
  }
}

}  // namespace

void pack_k_quant_weights(const WeightMatrix& w, uint8_t* dst) {
  switch (w.type) {
    case GgmlType::Q4_K:
      pack_groups<PackedQ4_Kx8, BlockQ4_K>(w, dst);
      break;
    case GgmlType::Q5_K:
      pack_groups<PackedQ5_Kx8, BlockQ5_K>(w, dst);
      break;
    case GgmlType::Q6_K:
      pack_groups<PackedQ6_Kx8, BlockQ6_K>(w, dst);
      break;
    default:
      break;
  }
}

void widen_q8_k_row(const uint8_t* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ8_K in;
    std::memcpy(&in, src + static_cast<size_t>(b) * sizeof in, sizeof in);
    PackedActBlockK out;
    out.d = in.d;
    std::memcpy(out.bsums, in.bsums, sizeof out.bsums);
    for (int j = 0; j < kQK_K / kQK; ++j) {
      out.bsums32[j] = static_cast<int16_t>(in.bsums[2 * j] + in.bsums[2 * j + 1]);
    }
    std::memcpy(out.qs, in.qs, sizeof out.qs);
    std::memcpy(dst + static_cast<size_t>(b) * sizeof out, &out, sizeof out);
  }
}

size_t tiled_activation_bytes(int64_t k, int64_t n) {
  const int64_t groups = (k + kActTileRows - 1) / kActTileRows;
  return static_cast<size_t>(groups * kActTileRows * n);
}

void tile_activation_rows(const uint8_t* rows, size_t stride, int64_t k, int64_t n, uint8_t* dst) {
  constexpr int64_t kTileRows = kActTileRows, kSlice = kActTileSliceBytes;
  const int64_t nb = n / kQK_K, groups = (k + kTileRows - 1) / kTileRows;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      for (int64_t s = 0; s < kQK_K / kSlice; ++s) {
        uint8_t* tile =
            dst + static_cast<size_t>(((g * nb + i) * (kQK_K / kSlice) + s) * kTileRows * kSlice);
        for (int64_t m = 0; m < kTileRows; ++m) {
          uint8_t* row = tile + m * kSlice;
          const int64_t t = g * kTileRows + m;
          if (t >= k) {
            std::memset(row, 0, kSlice);
            continue;
          }
          const auto* blocks =
              reinterpret_cast<const PackedActBlockK*>(rows + static_cast<size_t>(t) * stride);
          std::memcpy(row, blocks[i].qs + s * kSlice, kSlice);
        }
      }
    }
  }
}

uint8_t* amx_scratch(int slot, size_t bytes) {
  thread_local std::vector<uint8_t> buffers[3];
  std::vector<uint8_t>& v = buffers[slot];
  if (v.size() < bytes + 64) v.resize(bytes + 64);
  const auto p = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + (64 - p % 64) % 64;
}

}  // namespace specdec
