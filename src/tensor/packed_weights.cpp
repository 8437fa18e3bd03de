#include "tensor/packed_weights.h"

#include <cstring>

#include "common/error.h"
#include "tensor/packed_blocks.h"

namespace specdec {
namespace {

// Byte of a packed chunk that holds column j (0..31) of row r, and whether it is the high
// nibble (4-bit formats): columns 16..31 share bytes with 0..15.
struct Slot {
  int byte;
  bool high;
};
Slot nibble_slot(int r, int j) {
  const int jj = j & 15;
  return {32 * (jj / 4) + 4 * r + jj % 4, j >= 16};
}

// Element j (0..31) of a Q4_0/Q4_1/Q5_0 block's low 4 bits.
uint8_t nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0f) : static_cast<uint8_t>(qs[j - 16] >> 4);
}

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

template <typename Packed, typename Block>
void put_nibbles(Packed& p, int r, const Block& blk) {
  for (int j = 0; j < kQK; ++j) {
    const Slot s = nibble_slot(r, j);
    p.qs[s.byte] |= static_cast<uint8_t>(nibble(blk.qs, j) << (s.high ? 4 : 0));
  }
}

}  // namespace

bool packable(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 ||
         type == GgmlType::Q8_0;
}

size_t packed_bytes(const WeightMatrix& w) {
  if (!packable(w.type) || w.rows < kPackRows || w.cols <= 0 || w.cols % kQK != 0) return 0;
  return static_cast<size_t>(w.rows / kPackRows) * kPackRows * row_bytes(w.type, w.cols);
}

void pack_weights(const WeightMatrix& w, uint8_t* dst) {
  if (packed_bytes(w) == 0) fail("pack_weights: ", type_name(w.type), " matrix is not packable");
  switch (w.type) {
    case GgmlType::Q4_0:
      pack_groups<PackedQ4_0x8, BlockQ4_0>(w, dst, [](PackedQ4_0x8& p, int r, const BlockQ4_0& b) {
        p.d[r] = b.d;
        put_nibbles(p, r, b);
      });
      break;
    case GgmlType::Q4_1:
      pack_groups<PackedQ4_1x8, BlockQ4_1>(w, dst, [](PackedQ4_1x8& p, int r, const BlockQ4_1& b) {
        p.d[r] = b.d;
        p.m[r] = b.m;
        put_nibbles(p, r, b);
      });
      break;
    case GgmlType::Q5_0:
      pack_groups<PackedQ5_0x8, BlockQ5_0>(w, dst, [](PackedQ5_0x8& p, int r, const BlockQ5_0& b) {
        p.d[r] = b.d;
        put_nibbles(p, r, b);
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        for (int j = 0; j < kQK; ++j) {
          if (((qh >> j) & 1u) == 0) continue;
          const Slot s = nibble_slot(r, j);
          p.qh[s.byte / 32 + (s.high ? 4 : 0)] |= 1u << (s.byte % 32);
        }
      });
      break;
    case GgmlType::Q8_0:
      pack_groups<PackedQ8_0x8, BlockQ8_0>(w, dst, [](PackedQ8_0x8& p, int r, const BlockQ8_0& b) {
        p.d[r] = b.d;
        for (int j = 0; j < kQK; ++j) p.qs[32 * (j / 4) + 4 * r + j % 4] = b.qs[j];
      });
      break;
    default:
      break;
  }
}

}  // namespace specdec
