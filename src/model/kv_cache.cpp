#include "model/kv_cache.h"

#include <algorithm>

#include "common/error.h"
#include "model/model.h"
#include "tensor/vec_ops.h"

namespace specdec {

const char* kv_type_name(KvType type) { return type == KvType::F16 ? "f16" : "f32"; }

std::optional<KvType> parse_kv_type(std::string_view name) {
  if (name == "f32") return KvType::F32;
  if (name == "f16") return KvType::F16;
  return std::nullopt;
}

KvCache::KvCache(const ModelConfig& config, int32_t capacity, KvTypes types)
    : n_layer_(config.n_layer),
      n_head_kv_(config.n_head_kv),
      head_dim_(config.head_dim),
      capacity_(capacity),
      types_(types) {
  if (capacity < 1) fail("KV cache capacity must be at least 1, got ", capacity);
  if (n_layer_ < 1 || n_head_kv_ < 1 || head_dim_ < 1) fail("KV cache needs a loaded model config");
  const size_t n = static_cast<size_t>(n_layer_) * capacity_ * row_size();
  if (types.k == KvType::F32) {
    k_.assign(n, 0.0f);
  } else {
    k16_.assign(n, 0);
  }
  if (types.v == KvType::F32) {
    v_.assign(n, 0.0f);
  } else {
    v16_.assign(n, 0);
  }
}

void KvCache::store(int32_t layer, int32_t head, int32_t slot, const float* k, const float* v) {
  const size_t at = offset(layer, head, slot);
  if (types_.k == KvType::F32) {
    std::copy_n(k, head_dim_, k_.data() + at);
  } else {
    fp32_to_fp16_row(k, k16_.data() + at, head_dim_);
  }
  if (types_.v == KvType::F32) {
    std::copy_n(v, head_dim_, v_.data() + at);
  } else {
    fp32_to_fp16_row(v, v16_.data() + at, head_dim_);
  }
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
  if (src.types_ != types_) {
    fail("KV cache copy between different types (K ", kv_type_name(src.types_.k), ", V ",
         kv_type_name(src.types_.v), " into K ", kv_type_name(types_.k), ", V ",
         kv_type_name(types_.v), ")");
  }
  const size_t n = static_cast<size_t>(end - length_) * static_cast<size_t>(head_dim_);
  const auto copy = [&](const auto& from, auto& to) {
    if (from.empty()) return;
    for (int32_t l = 0; l < n_layer_; ++l) {
      for (int32_t h = 0; h < n_head_kv_; ++h) {
        std::copy_n(from.data() + src.offset(l, h, length_), n, to.data() + offset(l, h, length_));
      }
    }
  };
  copy(src.k_, k_);
  copy(src.v_, v_);
  copy(src.k16_, k16_);
  copy(src.v16_, v16_);
  length_ = end;
}

size_t KvCache::bytes() const {
  return (k_.size() + v_.size()) * sizeof(float) + (k16_.size() + v16_.size()) * sizeof(uint16_t);
}

size_t KvCache::bytes_for(const ModelConfig& config, int32_t capacity, KvTypes types) {
  // K and V: n_layer planes of capacity rows of n_head_kv * head_dim values each.
  const size_t values = static_cast<size_t>(config.n_layer) * static_cast<size_t>(capacity) *
                        static_cast<size_t>(config.n_head_kv) *
                        static_cast<size_t>(config.head_dim);
  const auto size = [](KvType t) { return t == KvType::F16 ? sizeof(uint16_t) : sizeof(float); };
  return values * (size(types.k) + size(types.v));
}

void KvCache::advance(int32_t k) {
  if (k < 0 || k > capacity_ - length_) {
    fail("KV cache overflow: ", length_, " + ", k, " tokens exceed capacity ", capacity_);
  }
  length_ += k;
}

}  // namespace specdec
