// Per-model key/value cache. Entries live in slots 0..length()-1 in the order they were
// appended; each entry remembers nothing but K and V (its RoPE position was applied to K when
// it was written). truncate(n) rolls back to n entries: later attention never sees the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

struct ModelConfig;

// How a cache stores K or V (llama.cpp's --cache-type-k / --cache-type-v): f32, the forward
// pass's own values; f16, rounded to nearest-even fp16 as they are written, which halves the
// cache's memory and what attention reads per token (llama.cpp's default); or q8_0, blocks of 32
// values rounded to 8 bits with one fp16 scale each (tensor/q8_rows.h: 136 bytes per 128 values,
// a bit over a quarter of f32), for heads whose size is a multiple of 32. Attention converts f16
// and q8_0 values back to floats before its float kernels, and scores q8_0 keys in exact integer
// arithmetic, so every split of the work computes the same bits and batch invariance holds for
// every type.
enum class KvType : uint8_t { F32, F16, Q8_0 };
struct KvTypes {
  KvType k = KvType::F32;
  KvType v = KvType::F32;
  bool operator==(const KvTypes&) const = default;
};
const char* kv_type_name(KvType type);  // "f32", "f16", "q8_0"
// Both parts for reports: the one name when K and V agree ("q8_0"), else "K q8_0, V f16".
std::string kv_types_name(KvTypes types);
std::optional<KvType> parse_kv_type(std::string_view name);

class KvCache {
 public:
  // Allocates capacity slots for every layer up front; throws specdec::Error when capacity < 1,
  // or when a part is q8_0 and the head size is not a multiple of 32.
  KvCache(const ModelConfig& config, int32_t capacity, KvTypes types = {});

  KvTypes types() const { return types_; }

  int32_t length() const { return length_; }
  int32_t capacity() const { return capacity_; }
  int32_t n_layer() const { return n_layer_; }
  int32_t n_head_kv() const { return n_head_kv_; }
  int32_t head_dim() const { return head_dim_; }
  int32_t row_size() const { return n_head_kv_ * head_dim_; }  // floats per token, all KV heads
  void truncate(int32_t n);  // requires 0 <= n <= length(), else throws
  void clear() { truncate(0); }
  // Appends src's entries length()..end-1 (K and V of every layer and head), so that this cache
  // holds end entries: for a sequence that shares its first `end` tokens with src's, whose K/V
  // are then the same bits (their positions are the same and the forward pass is batch
  // invariant), instead of recomputing them. src must have this cache's shape and hold those
  // entries; it is only read, and its length() is not (another thread may be moving it past
  // them). Throws when the shapes differ or end is outside [length(), capacity()].
  void extend_from(const KvCache& src, int32_t end);

  // Hands the first n entries' K and V (every layer and head, in the cache's types and layout) to
  // `write` in pieces, for a file (engine/slot_file.h); row_bytes(n) bytes in all. load_rows
  // reads what save_rows wrote for a cache of the same shape and types, through `read` (which
  // fills each piece whole or throws), into entries 0..n-1: the cache then holds n entries, the
  // same bits. Both throw when n is outside [0, length()] (save) or [0, capacity()] (load).
  using RowWriter = std::function<void(const void* data, size_t n)>;
  using RowReader = std::function<void(void* data, size_t n)>;
  void save_rows(int32_t n, const RowWriter& write) const;
  void load_rows(int32_t n, const RowReader& read);
  size_t row_bytes(int32_t n) const;

  // Writes slot `slot`'s K and V of layer l, KV head h (head_dim floats each), in the cache's
  // types.
  void store(int32_t layer, int32_t head, int32_t slot, const float* k, const float* v);

  // K/V of layer l, KV head h, slot s: head_dim values, floats (k(), v(): only when that part's
  // type is f32), fp16 bits (k16(), v16(): only when it is f16), or q8_0 (k8_tiles(): head h's
  // key tiles, slot s in tile s / 16 (q8_tile_bytes apart) at lane s % 16; v8(): one value row
  // of q8_row_bytes). Each (layer, head) owns one plane of capacity() rows, so one head's slots
  // lie back to back: attention streams a head's keys as one contiguous run (a token-major layout
  // made it read a third of every line at a stride, which at a context of 400 cost a SmolLM2 decode
  // step as much as all its matmuls).
  const uint16_t* k16(int32_t layer, int32_t head, int32_t slot) const {
    return k16_.data() + offset(layer, head, slot);
  }
  const uint16_t* v16(int32_t layer, int32_t head, int32_t slot) const {
    return v16_.data() + offset(layer, head, slot);
  }
  const uint8_t* k8_tiles(int32_t layer, int32_t head) const {
    return k8_.data() + (static_cast<size_t>(layer) * n_head_kv_ + head) * n_tiles() * tile_bytes_;
  }
  const uint8_t* v8(int32_t layer, int32_t head, int32_t slot) const {
    return v8_.data() + (offset(layer, head, slot) / head_dim_) * v8_row_bytes_;
  }
  float* k(int32_t layer, int32_t head, int32_t slot) {
    return k_.data() + offset(layer, head, slot);
  }
  float* v(int32_t layer, int32_t head, int32_t slot) {
    return v_.data() + offset(layer, head, slot);
  }
  const float* k(int32_t layer, int32_t head, int32_t slot) const {
    return k_.data() + offset(layer, head, slot);
  }
  const float* v(int32_t layer, int32_t head, int32_t slot) const {
    return v_.data() + offset(layer, head, slot);
  }
  size_t bytes() const;
  // What bytes() is for a cache of this capacity, without allocating one (memory reports).
  static size_t bytes_for(const ModelConfig& config, int32_t capacity, KvTypes types = {});

  // Called by forward() after writing k new slots; throws if that would pass capacity().
  void advance(int32_t k);

 private:
  size_t offset(int32_t layer, int32_t head, int32_t slot) const {
    return ((static_cast<size_t>(layer) * n_head_kv_ + head) * capacity_ + slot) * head_dim_;
  }
  size_t n_tiles() const { return (static_cast<size_t>(capacity_) + 15) / 16; }
  // Where slot 0 of part (0: K, 1: V) of layer, head lies in the part's storage: the run that
  // save_rows and load_rows copy.
  const void* run_data(int part, int32_t layer, int32_t head) const;
  size_t k8_tile_offset(int32_t layer, int32_t head, int32_t slot) const {
    return ((static_cast<size_t>(layer) * n_head_kv_ + head) * n_tiles() + slot / 16) * tile_bytes_;
  }
  int32_t n_layer_, n_head_kv_, head_dim_, capacity_, length_ = 0;
  KvTypes types_;
  size_t tile_bytes_ = 0, v8_row_bytes_ = 0;  // q8_0 key tile and value row sizes
  std::vector<float> k_, v_;                  // f32 parts (empty otherwise)
  std::vector<uint16_t> k16_, v16_;           // f16 parts (empty otherwise)
  std::vector<uint8_t> k8_, v8_;              // q8_0 parts (empty otherwise)
};

}  // namespace specdec
