// Scalar packed kernels: the reference the AVX2 ones are tested against bitwise. The integer
// block sums are exact in any order; the float steps mirror the vector code one for one
// (block sum to float, d_w * d_x, one fused multiply-add per block, then for Q4_1 the min term
// fused into the same accumulator), so every lane gets the same roundings.
#include <cmath>
#include <cstring>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

// Column j (0..31) of row r in a 4-bit packed block: its low 4 bits.
int packed_nibble(const uint8_t* qs, int r, int j) {
  const int jj = j & 15;
  const uint8_t byte = qs[32 * (jj / 4) + 4 * r + jj % 4];
  return j < 16 ? (byte & 0x0f) : (byte >> 4);
}

int packed_q5_high(const uint32_t* qh, int r, int j) {
  const int jj = j & 15;
  return static_cast<int>((qh[jj / 4 + (j >= 16 ? 4 : 0)] >> (4 * r + jj % 4)) & 1u);
}

// Weight value (integer part) of column j of row r.
int value(const PackedQ4_0x8& b, int r, int j) { return packed_nibble(b.qs, r, j) - 8; }
int value(const PackedQ4_1x8& b, int r, int j) { return packed_nibble(b.qs, r, j); }
int value(const PackedQ5_0x8& b, int r, int j) {
  return (packed_nibble(b.qs, r, j) | (packed_q5_high(b.qh, r, j) << 4)) - 16;
}
int value(const PackedQ8_0x8& b, int r, int j) { return b.qs[32 * (j / 4) + 4 * r + j % 4]; }

template <typename P>
constexpr bool kHasMin = false;
template <>
constexpr bool kHasMin<PackedQ4_1x8> = true;

template <typename P>
void packed_dot(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx, float* out,
                int64_t os) {
  using X = PackedActBlock;
  const int64_t nb = n / kQK;
  for (int64_t t = 0; t < nx; ++t) {
    float acc[kPackRows] = {};
    for (int64_t i = 0; i < nb; ++i) {
      P pb;
      X xb;
      std::memcpy(&pb, w + static_cast<size_t>(i) * sizeof(P), sizeof pb);
      std::memcpy(&xb, x + static_cast<size_t>(t) * xs + static_cast<size_t>(i) * sizeof(X),
                  sizeof xb);
      const float xd = xb.d;
      for (int r = 0; r < kPackRows; ++r) {
        int32_t isum = 0;
        for (int j = 0; j < kQK; ++j) isum += value(pb, r, j) * xb.qs[j];
        const float scale = fp16_to_fp32(pb.d[r]) * xd;
        acc[r] = std::fma(static_cast<float>(isum), scale, acc[r]);
        if constexpr (kHasMin<P>) {
          acc[r] = std::fma(fp16_to_fp32(pb.m[r]), xb.s, acc[r]);
        }
      }
    }
    for (int r = 0; r < kPackRows; ++r) out[t * os + r] = acc[r];
  }
}

}  // namespace

const PackedKernelTable& packed_kernels_scalar() {
  static constexpr PackedKernelTable kTable = {
      packed_dot<PackedQ4_0x8>,
      packed_dot<PackedQ4_1x8>,
      packed_dot<PackedQ5_0x8>,
      packed_dot<PackedQ8_0x8>,
  };
  return kTable;
}

}  // namespace specdec
