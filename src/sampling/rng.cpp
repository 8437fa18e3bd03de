#include "sampling/rng.h"

namespace specdec {

namespace {

// splitmix64 turns any 64-bit seed (including 0) into well-mixed state words; xoshiro's state
// must not be all zero, and splitmix64 of consecutive outputs never is.
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

// The top 53 bits fill a double's mantissa exactly: every value k * 2^-53 is equally likely, so
// P(uniform() < x) = x up to 2^-53 for any x in [0, 1], and 1.0 itself is never returned.
double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

}  // namespace specdec
