// Per-model key/value cache. Entries live in slots 0..length()-1 in the order they were
// appended; each entry remembers nothing but K and V (its RoPE position was applied to K when
// it was written). truncate(n) rolls back to n entries: later attention never sees the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec {

struct ModelConfig;

class KvCache {
 public:
  // Allocates capacity slots for every layer up front (f32); throws specdec::Error when
  // capacity < 1.
  KvCache(const ModelConfig& config, int32_t capacity);

  int32_t length() const { return length_; }
  int32_t capacity() const { return capacity_; }
  int32_t n_layer() const { return n_layer_; }
  int32_t row_size() const { return row_; }  // floats per K (or V) row: n_head_kv * head_dim
  void truncate(int32_t n);                  // requires 0 <= n <= length(), else throws
  void clear() { truncate(0); }

  // K/V rows for layer l, slot s: n_head_kv * head_dim floats each. Slots of one layer are
  // contiguous, so attention walks them with a fixed stride.
  float* k(int32_t layer, int32_t slot) { return k_.data() + offset(layer, slot); }
  float* v(int32_t layer, int32_t slot) { return v_.data() + offset(layer, slot); }
  const float* k(int32_t layer, int32_t slot) const { return k_.data() + offset(layer, slot); }
  const float* v(int32_t layer, int32_t slot) const { return v_.data() + offset(layer, slot); }
  size_t bytes() const;

  // Called by forward() after writing k new slots; throws if that would pass capacity().
  void advance(int32_t k);

 private:
  size_t offset(int32_t layer, int32_t slot) const {
    return (static_cast<size_t>(layer) * capacity_ + slot) * row_;
  }
  int32_t n_layer_, row_, capacity_, length_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace specdec
