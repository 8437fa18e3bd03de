// Seeded standard-normal float vectors for kernel tests and micro-benchmarks: the same seed
// gives the same values everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace specdec::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace specdec::testing
