// Scalar packed K-quant kernels: the reference the AVX2 and AVX-512 VNNI ones are tested against
// bitwise. Each weight is decoded from the packed layout on its own (slow and obvious); the
// integer super-block sums are exact in any order, and the float steps are the vector code's one
// for one: per super-block and row, d * d_x, one fused multiply-add of the scaled sum, then for
// Q4_K/Q5_K dmin * d_x and one fused multiply-subtract of the min sum, into the same accumulator.
#include <cmath>
#include <cstring>

#include "tensor/kernel_types.h"
#include "tensor/packed_blocks.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

// Column x (0..31) of a 32-column sub-block: the 4-bit layout's load, byte within a row's 4,
// whether it sits in the high nibble, and its chunk number (packed_blocks.h).
struct Place {
  int load, byte;
  bool high;
  int chunk;
};
Place place(int r, int x) {
  const bool high = x >= 16;
  const int load = (x % 16) / 4;
  return {load, 4 * r + x % 4, high, load + (high ? 4 : 0)};
}

int nibble(const uint8_t (&qs)[4][32], const Place& p) {
  const uint8_t b = qs[p.load][p.byte];
  return p.high ? b >> 4 : b & 0x0f;
}

// The 6-bit scales and mins of row r (BlockQ4_K's packing, from its 12 bytes).
void scales_of(const uint32_t (&words)[3][kPackRows], int r, int sc[8], int m[8]) {
  uint8_t s[12];
  for (int w = 0; w < 3; ++w) std::memcpy(s + 4 * w, &words[w][r], 4);
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
    m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

template <typename P>
int q45_value(const P& b, int r, int j, int x) {
  const Place p = place(r, x);
  int q = nibble(b.subs[j].qs, p);
  if constexpr (sizeof(P) == sizeof(PackedQ5_Kx8))
    q |= ((b.subs[j].qh[p.byte] >> p.chunk) & 1) << 4;
  return q;
}

int q6_value(const PackedQ6_Kx8& b, int r, int g, int x) {
  const Place p = place(r, x);
  const int hi = (b.groups[g].qh[p.chunk / 4][p.byte] >> (2 * (p.chunk % 4))) & 3;
  return nibble(b.groups[g].ql, p) | (hi << 4);
}

// Per super-block and row: sumi = sum_j sc[j] * (q . y over sub-block j) and, for Q4_K/Q5_K,
// summ = sum_j m[j] * (y's sum over sub-block j); x = d * sc * q - dmin * m.
template <typename P>
void block_q45(const P& b, const PackedActBlockK& y, int r, int32_t* sumi, int32_t* summ) {
  int sc[8], m[8];
  scales_of(b.scales, r, sc, m);
  *sumi = *summ = 0;
  for (int j = 0; j < 8; ++j) {
    int32_t s = 0;
    for (int x = 0; x < 32; ++x) s += q45_value(b, r, j, x) * y.qs[32 * j + x];
    *sumi += sc[j] * s;
    *summ += m[j] * y.bsums32[j];
  }
}

// sumi = sum over the 16 sub-blocks of sc * ((q - 32) . y).
void block_q6(const PackedQ6_Kx8& b, const PackedActBlockK& y, int r, int32_t* sumi) {
  *sumi = 0;
  for (int g = 0; g < 8; ++g) {
    for (int e = 0; e < 2; ++e) {
      int32_t s = 0;
      for (int x = 16 * e; x < 16 * e + 16; ++x)
        s += (q6_value(b, r, g, x) - 32) * y.qs[32 * g + x];
      *sumi += b.groups[g].scales[2 * r + e] * s;
    }
  }
}

template <typename P>
void packed_dot(int64_t n, const uint8_t* w, const uint8_t* x, size_t xs, int64_t nx, float* out,
                int64_t os) {
  using X = PackedActBlockK;
  constexpr bool kMin = sizeof(P) != sizeof(PackedQ6_Kx8);
  const int64_t nb = n / kQK_K;
  for (int64_t t = 0; t < nx; ++t) {
    float acc[kPackRows] = {};
    for (int64_t i = 0; i < nb; ++i) {
      P pb;
      X xb;
      std::memcpy(&pb, w + static_cast<size_t>(i) * sizeof(P), sizeof pb);
      std::memcpy(&xb, x + static_cast<size_t>(t) * xs + static_cast<size_t>(i) * sizeof(X),
                  sizeof xb);
      for (int r = 0; r < kPackRows; ++r) {
        int32_t sumi = 0, summ = 0;
        if constexpr (kMin) {
          block_q45(pb, xb, r, &sumi, &summ);
        } else {
          block_q6(pb, xb, r, &sumi);
        }
        const float scale = fp16_to_fp32(pb.d[r]) * xb.d;
        acc[r] = std::fma(static_cast<float>(sumi), scale, acc[r]);
        if constexpr (kMin) {
          const float mscale = fp16_to_fp32(pb.dmin[r]) * xb.d;
          acc[r] = std::fma(-static_cast<float>(summ), mscale, acc[r]);
        }
      }
    }
    for (int r = 0; r < kPackRows; ++r) out[t * os + r] = acc[r];
  }
}

}  // namespace

const PackedKKernelTable& packed_k_kernels_scalar() {
  static constexpr PackedKKernelTable kTable = {
      packed_dot<PackedQ4_Kx8>,
      packed_dot<PackedQ5_Kx8>,
      packed_dot<PackedQ6_Kx8>,
  };
  return kTable;
}

}  // namespace specdec
