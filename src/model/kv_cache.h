// Per-model key/value cache. Entries live in slots 0..length()-1 in the order they were
// appended; each entry remembers nothing but K and V (its RoPE position was applied to K when
// it was written). truncate(n) rolls back to n entries: later attention never sees the rest.
#pragma once

#include <cstdint>
#include <vector>

namespace specdec {

struct ModelConfig;

class KvCache {
 public:
  KvCache(const ModelConfig& config, int32_t capacity);

  int32_t length() const { return length_; }
  int32_t capacity() const { return capacity_; }
  void truncate(int32_t n);  // requires n <= length()
  void clear() { truncate(0); }

  // K/V rows for layer l, slot s: n_head_kv * head_dim floats each.
  float* k(int32_t layer, int32_t slot);
  float* v(int32_t layer, int32_t slot);
  const float* k(int32_t layer, int32_t slot) const;
  const float* v(int32_t layer, int32_t slot) const;
  size_t bytes() const;

  // Called by forward() after writing k new slots.
  void advance(int32_t k);

 private:
  int32_t n_layer_, row_, capacity_, length_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace specdec
