#include "model/kv_cache.h"

#include <algorithm>

#include "common/error.h"
#include "model/model.h"
#include "tensor/q8_rows.h"
#include "tensor/vec_ops.h"

namespace specdec {

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::F16:
      return "f16";
    case KvType::Q8_0:
      return "q8_0";
    case KvType::F32:
      break;
  }
  return "f32";
}

std::string kv_types_name(KvTypes types) {
  if (types.k == types.v) return kv_type_name(types.k);
  return std::string("K ") + kv_type_name(types.k) + ", V " + kv_type_name(types.v);
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  if (name == "f32") return KvType::F32;
  if (name == "f16") return KvType::F16;
  if (name == "q8_0") return KvType::Q8_0;
  return std::nullopt;
}

namespace {

// Bytes per value of a part of that type (q8_0 keys: a tile's 17 bytes per 16 values, its
// capacity rounded up to whole tiles, is counted by bytes_for).
size_t part_bytes(KvType type, size_t values) {
  switch (type) {
    case KvType::F16:
      return values * sizeof(uint16_t);
    case KvType::Q8_0:
      return values + values / 16;
    case KvType::F32:
      break;
  }
  return values * sizeof(float);
}

}  // namespace

KvCache::KvCache(const ModelConfig& config, int32_t capacity, KvTypes types)
    : n_layer_(config.n_layer),
      n_head_kv_(config.n_head_kv),
      head_dim_(config.head_dim),
      capacity_(capacity),
      types_(types) {
  if (capacity < 1) fail("KV cache capacity must be at least 1, got ", capacity);
  if (n_layer_ < 1 || n_head_kv_ < 1 || head_dim_ < 1) fail("KV cache needs a loaded model config");
  if ((types.k == KvType::Q8_0 || types.v == KvType::Q8_0) && head_dim_ % kQ8Block != 0) {
    fail("a q8_0 KV cache needs a head size that is a multiple of ", kQ8Block, "; this model's is ",
         head_dim_, " (use f16 or f32)");
  }
  const size_t n = static_cast<size_t>(n_layer_) * capacity_ * row_size();
  switch (types.k) {
    case KvType::F32:
      k_.assign(n, 0.0f);
      break;
    case KvType::F16:
      k16_.assign(n, 0);
      break;
    case KvType::Q8_0:
      tile_bytes_ = q8_tile_bytes(head_dim_);
      k8_.assign(static_cast<size_t>(n_layer_) * n_head_kv_ * n_tiles() * tile_bytes_, 0);
      break;
  }
  switch (types.v) {
    case KvType::F32:
      v_.assign(n, 0.0f);
      break;
    case KvType::F16:
      v16_.assign(n, 0);
      break;
    case KvType::Q8_0:
      v8_row_bytes_ = q8_row_bytes(head_dim_);
      v8_.assign(n / head_dim_ * v8_row_bytes_, 0);
      break;
  }
}

void KvCache::store(int32_t layer, int32_t head, int32_t slot, const float* k, const float* v) {
  const size_t at = offset(layer, head, slot);
  switch (types_.k) {
    case KvType::F32:
      std::copy_n(k, head_dim_, k_.data() + at);
      break;
    case KvType::F16:
      fp32_to_fp16_row(k, k16_.data() + at, head_dim_);
      break;
    case KvType::Q8_0:
      store_q8_tile_row(k, head_dim_, k8_.data() + k8_tile_offset(layer, head, slot),
                        slot % kQ8TileRows);
      break;
  }
  switch (types_.v) {
    case KvType::F32:
      std::copy_n(v, head_dim_, v_.data() + at);
      break;
    case KvType::F16:
      fp32_to_fp16_row(v, v16_.data() + at, head_dim_);
      break;
    case KvType::Q8_0:
      quantize_q8_row(v, head_dim_, v8_.data() + at / head_dim_ * v8_row_bytes_);
      break;
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
  for (int32_t l = 0; l < n_layer_; ++l) {
    for (int32_t h = 0; h < n_head_kv_; ++h) {
      if (!k8_.empty()) {
        // Row by row: the tiles' other lanes hold this cache's own earlier slots.
        for (int32_t s = length_; s < end; ++s) {
          copy_q8_tile_row(src.k8_.data() + src.k8_tile_offset(l, h, s),
                           k8_.data() + k8_tile_offset(l, h, s), head_dim_, s % kQ8TileRows);
        }
      }
      if (!v8_.empty()) {
        const size_t row = src.offset(l, h, length_) / head_dim_,
                     to = offset(l, h, length_) / head_dim_;
        std::copy_n(src.v8_.data() + row * v8_row_bytes_,
                    static_cast<size_t>(end - length_) * v8_row_bytes_,
                    v8_.data() + to * v8_row_bytes_);
      }
    }
  }
  length_ = end;
}

namespace {

// The pieces of entries 0..n-1, in one order for saving and loading: per part (K, then V), per
// layer and KV head, the run of bytes that holds them. q8_0 keys live in tiles of 16 slots, so
// their run is the whole tiles that cover the n entries (lanes past n in the last one carry
// whatever that tile held; a cache never reads past its length).
template <typename Piece>
void for_each_run(const KvCache& c, int32_t n, size_t q8_tile_bytes, size_t v8_row_bytes,
                  const Piece& piece) {
  const size_t head = static_cast<size_t>(c.head_dim());
  const auto rows = static_cast<size_t>(n);
  const size_t tiles = (rows + kQ8TileRows - 1) / kQ8TileRows;
  for (int part = 0; part < 2; ++part) {
    const KvType type = part == 0 ? c.types().k : c.types().v;
    for (int32_t l = 0; l < c.n_layer(); ++l) {
      for (int32_t h = 0; h < c.n_head_kv(); ++h) {
        switch (type) {
          case KvType::F32:
            piece(part, l, h, rows * head * sizeof(float));
            break;
          case KvType::F16:
            piece(part, l, h, rows * head * sizeof(uint16_t));
            break;
          case KvType::Q8_0:
            piece(part, l, h, part == 0 ? tiles * q8_tile_bytes : rows * v8_row_bytes);
            break;
        }
      }
    }
  }
}

}  // namespace

size_t KvCache::row_bytes(int32_t n) const {
  size_t total = 0;
  for_each_run(*this, std::max(n, 0), tile_bytes_, v8_row_bytes_,
               [&](int, int32_t, int32_t, size_t bytes) { total += bytes; });
  return total;
}

const void* KvCache::run_data(int part, int32_t layer, int32_t head) const {
  const size_t at = offset(layer, head, 0);
  switch (part == 0 ? types_.k : types_.v) {
    case KvType::F32:
      return (part == 0 ? k_ : v_).data() + at;
    case KvType::F16:
      return (part == 0 ? k16_ : v16_).data() + at;
    case KvType::Q8_0:
      return part == 0 ? k8_.data() + k8_tile_offset(layer, head, 0)
                       : v8_.data() + at / head_dim_ * v8_row_bytes_;
  }
  return nullptr;
}

void KvCache::save_rows(int32_t n, const RowWriter& write) const {
  if (n < 0 || n > length_) fail("KV cache save of ", n, " entries outside [0, ", length_, "]");
  for_each_run(*this, n, tile_bytes_, v8_row_bytes_,
               [&](int part, int32_t l, int32_t h, size_t bytes) {
                 if (bytes > 0) write(run_data(part, l, h), bytes);
               });
}

void KvCache::load_rows(int32_t n, const RowReader& read) {
  if (n < 0 || n > capacity_) fail("KV cache load of ", n, " entries outside [0, ", capacity_, "]");
  // Until every piece is in, the cache holds nothing valid.
  length_ = 0;
  for_each_run(*this, n, tile_bytes_, v8_row_bytes_,
               [&](int part, int32_t l, int32_t h, size_t bytes) {
                 // The cache's own storage, reached through the const accessor.
                 if (bytes > 0) read(const_cast<void*>(run_data(part, l, h)), bytes);
               });
  length_ = n;
}

size_t KvCache::bytes() const {
  return (k_.size() + v_.size()) * sizeof(float) + (k16_.size() + v16_.size()) * sizeof(uint16_t) +
         k8_.size() + v8_.size();
}

size_t KvCache::bytes_for(const ModelConfig& config, int32_t capacity, KvTypes types) {
  // K and V: n_layer planes of capacity rows of n_head_kv * head_dim values each.
  const size_t planes = static_cast<size_t>(config.n_layer) * static_cast<size_t>(config.n_head_kv);
  const size_t head = static_cast<size_t>(config.head_dim);
  const size_t values = planes * static_cast<size_t>(capacity) * head;
  // q8_0 keys fill whole tiles of 16 slots.
  const size_t key_values = types.k == KvType::Q8_0
                                ? planes * ((static_cast<size_t>(capacity) + 15) / 16 * 16) * head
                                : values;
  return part_bytes(types.k, key_values) + part_bytes(types.v, values);
}

void KvCache::advance(int32_t k) {
  if (k < 0 || k > capacity_ - length_) {
    fail("KV cache overflow: ", length_, " + ", k, " tokens exceed capacity ", capacity_);
  }
  length_ += k;
}

}  // namespace specdec
