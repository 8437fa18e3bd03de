#include "tensor/packed_weights.h"

#include <cstring>

#include "common/error.h"
#include "tensor/cpu_features.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights_k.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

template <typename Packed, typename Block, typename Fill>
void pack_groups(const WeightMatrix& w, uint8_t* dst, Fill fill) {
  const int64_t nb = w.cols / kQK, groups = w.rows / kPackRows;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      Packed p;
      std::memset(&p, 0, sizeof p);
      for (int r = 0; r < kPackRows; ++r) {
        const uint8_t* row = w.data + static_cast<size_t>(g * kPackRows + r) * w.row_stride;
        Block blk;
        std::memcpy(&blk, row + static_cast<size_t>(b) * sizeof(Block), sizeof blk);
        fill(p, r, blk);
      }
      std::memcpy(dst + static_cast<size_t>(g * nb + b) * sizeof(Packed), &p, sizeof p);
    }
  }
}

// Byte j < 16 of a 4-bit block holds column j (low nibble) and column j + 16 (high nibble),
// and chunk p of the packed block wants exactly columns 4p..4p+3 and 16+4p..16+4p+3 of row r at
// bytes 4r..4r+3: so each chunk's 4 bytes are copied unchanged. The same copy places Q8_0's
// columns 4p..4p+3 (one byte each).
template <typename Packed, typename Block>
void put_chunks(Packed& p, int r, const Block& blk, int chunks) {
  for (int c = 0; c < chunks; ++c) std::memcpy(&p.qs[32 * c + 4 * r], &blk.qs[4 * c], 4);
}

}  // namespace

bool packable(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 ||
         type == GgmlType::Q8_0 || type == GgmlType::Q4_K || type == GgmlType::Q5_K ||
         type == GgmlType::Q6_K;
}

size_t packed_bytes(const WeightMatrix& w) {
  if (!packable(w.type) || w.rows < kPackRows || w.cols <= 0 ||
      w.cols % traits(w.type).block_size != 0) {
    return 0;
  }
  return static_cast<size_t>(w.rows / kPackRows) * kPackRows * row_bytes(w.type, w.cols);
}

void pack_weights(const WeightMatrix& w, uint8_t* dst) {
  if (packed_bytes(w) == 0) fail("pack_weights: ", type_name(w.type), " matrix is not packable");
  switch (w.type) {
    case GgmlType::Q4_0:
      pack_groups<PackedQ4_0x8, BlockQ4_0>(w, dst, [](PackedQ4_0x8& p, int r, const BlockQ4_0& b) {
        p.d[r] = b.d;
        put_chunks(p, r, b, 4);
      });
      break;
    case GgmlType::Q4_1:
      pack_groups<PackedQ4_1x8, BlockQ4_1>(w, dst, [](PackedQ4_1x8& p, int r, const BlockQ4_1& b) {
        p.d[r] = b.d;
        p.m[r] = b.m;
        put_chunks(p, r, b, 4);
      });
      break;
    case GgmlType::Q5_0:
      pack_groups<PackedQ5_0x8, BlockQ5_0>(w, dst, [](PackedQ5_0x8& p, int r, const BlockQ5_0& b) {
        p.d[r] = b.d;
        put_chunks(p, r, b, 4);
        // Bit 4r + c of chunk mask s is the fifth bit of column 4s + c (s < 4) or
        // 16 + 4(s - 4) + c: a nibble of the block's qh, moved to row r's place.
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        for (int c = 0; c < 8; ++c) p.qh[c] |= ((qh >> (4 * c)) & 0xfu) << (4 * r);
      });
      break;
    case GgmlType::Q8_0:
      pack_groups<PackedQ8_0x8, BlockQ8_0>(w, dst, [](PackedQ8_0x8& p, int r, const BlockQ8_0& b) {
        p.d[r] = b.d;
        put_chunks(p, r, b, 8);
      });
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      pack_k_quant_weights(w, dst);
      break;
    default:
      break;
  }
}

size_t widened_row_bytes(GgmlType act_type, int64_t n) {
  return act_type == GgmlType::Q8_K ? static_cast<size_t>(n / kQK_K) * sizeof(PackedActBlockK)
                                    : static_cast<size_t>(n / kQK) * sizeof(PackedActBlock);
}

void widen_activation_row(GgmlType act_type, const uint8_t* src, uint8_t* dst, int64_t n) {
  if (act_type == GgmlType::Q8_K) {
    widen_q8_k_row(src, dst, n);
    return;
  }
  const bool q8_1 = act_type == GgmlType::Q8_1;
  if (!q8_1 && act_type != GgmlType::Q8_0) {
    fail("widen_activation_row: ", type_name(act_type), " is not a packed activation format");
  }
  if (uses_avx2(active_isa())) {
    widen_activation_row_avx2(q8_1, src, dst, n);
    return;
  }
  const size_t src_block = q8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* in = src + static_cast<size_t>(b) * src_block;
    PackedActBlock out{};
    uint16_t h;
    std::memcpy(&h, in, 2);
    out.d = fp16_to_fp32(h);
    if (q8_1) {
      std::memcpy(&h, in + 2, 2);
      out.s = fp16_to_fp32(h);
    }
    std::memcpy(out.qs, in + (q8_1 ? 4 : 2), kQK);
    for (int8_t v : out.qs) out.sum += v;
    std::memcpy(dst + static_cast<size_t>(b) * sizeof(PackedActBlock), &out, sizeof out);
  }
}

}  // namespace specdec
