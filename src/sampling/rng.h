// The one seeded random stream that drives every random choice in a run (draft sampling,
// accept/reject uniforms, corrections), so a run is reproducible from its seed.
#pragma once

#include <cstdint>

namespace specdec {

// xoshiro256** seeded through splitmix64: fast, good quality, identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();

 private:
  uint64_t s_[4];
};

}  // namespace specdec
