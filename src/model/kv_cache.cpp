#include "model/kv_cache.h"

#include <algorithm>

#include "common/error.h"
#include "model/model.h"

namespace specdec {

KvCache::KvCache(const ModelConfig& config, int32_t capacity)
    : n_layer_(config.n_layer),
      n_head_kv_(config.n_head_kv),
      head_dim_(config.head_dim),
      capacity_(capacity) {
  if (capacity < 1) fail("KV cache capacity must be at least 1, got ", capacity);
  if (n_layer_ < 1 || n_head_kv_ < 1 || head_dim_ < 1) fail("KV cache needs a loaded model config");
  const size_t n = static_cast<size_t>(n_layer_) * capacity_ * row_size();
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

void KvCache::truncate(int32_t n) {
  if (n < 0 || n > length_) fail("KV cache truncate(", n, ") outside [0, ", length_, "]");
  length_ = n;
}

void KvCache::extend_from(const KvCache& src, int32_t end) {
  if (src.n_layer_ != n_layer_ || src.n_head_kv_ != n_head_kv_ || src.head_dim_ != head_dim_) {
    fail("KV cache copy between different shapes (", src.n_layer_, "x", src.n_head_kv_, "x",
         src.head_dim_, " into ", n_layer_, "x", n_head_kv_, "x", head_dim_, ")");
  }
  if (end < length_ || end > capacity_ || end > src.capacity_) {
    fail("KV cache copy to ", end, " entries outside [", length_, ", ",
         std::min(capacity_, src.capacity_), "]");
  }
  const size_t n = static_cast<size_t>(end - length_) * static_cast<size_t>(head_dim_);
  for (int32_t l = 0; l < n_layer_; ++l) {
    for (int32_t h = 0; h < n_head_kv_; ++h) {
      std::copy_n(src.k(l, h, length_), n, k(l, h, length_));
      std::copy_n(src.v(l, h, length_), n, v(l, h, length_));
    }
  }
  length_ = end;
}

size_t KvCache::bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

size_t KvCache::bytes_for(const ModelConfig& config, int32_t capacity) {
  // K and V: n_layer planes of capacity rows of n_head_kv * head_dim floats each.
  return 2 * static_cast<size_t>(config.n_layer) * static_cast<size_t>(capacity) *
         static_cast<size_t>(config.n_head_kv) * static_cast<size_t>(config.head_dim) *
         sizeof(float);
}

void KvCache::advance(int32_t k) {
  if (k < 0 || k > capacity_ - length_) {
    fail("KV cache overflow: ", length_, " + ", k, " tokens exceed capacity ", capacity_);
  }
  length_ += k;
}

}  // namespace specdec
