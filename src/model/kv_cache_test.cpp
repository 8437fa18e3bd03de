#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  return c;
}

TEST(KvCache, LayoutAndBytes) {
  KvCache cache(small_config(), 10);
  EXPECT_EQ(cache.capacity(), 10);
  EXPECT_EQ(cache.length(), 0);
  EXPECT_EQ(cache.row_size(), 16);
  EXPECT_EQ(cache.bytes(), 2u * 3 * 10 * 16 * sizeof(float));
  EXPECT_EQ(KvCache::bytes_for(small_config(), 10), cache.bytes());
  // One plane of capacity x head_dim per (layer, KV head): a head's slots are contiguous.
  EXPECT_EQ(cache.k(1, 0, 2) - cache.k(1, 0, 1), 8);
  EXPECT_EQ(cache.k(1, 1, 0) - cache.k(1, 0, 0), 10 * 8);
  EXPECT_EQ(cache.k(2, 0, 0) - cache.k(1, 0, 0), 10 * 16);
  EXPECT_EQ(cache.v(2, 1, 9) - cache.v(0, 0, 0), 2 * 10 * 16 + 10 * 8 + 9 * 8);
  EXPECT_NE(cache.k(0, 0, 0), cache.v(0, 0, 0));
}

TEST(KvCache, AdvanceTruncateAndErrors) {
  KvCache cache(small_config(), 4);
  cache.advance(3);
  EXPECT_EQ(cache.length(), 3);
  EXPECT_THROW(cache.advance(2), Error);
  EXPECT_EQ(cache.length(), 3);
  EXPECT_THROW(cache.truncate(4), Error);
  EXPECT_THROW(cache.truncate(-1), Error);
  cache.truncate(1);
  EXPECT_EQ(cache.length(), 1);
  cache.advance(3);
  EXPECT_EQ(cache.length(), 4);
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_THROW(KvCache(small_config(), 0), Error);
}

// A value that names its layer, head, entry and element.
float entry_value(float base, int32_t l, int32_t h, int32_t e, int32_t d) {
  return base + static_cast<float>(((l * 8 + h) * 16 + e) * 8 + d);
}

void fill(KvCache& cache, float base) {
  for (int32_t l = 0; l < cache.n_layer(); ++l) {
    for (int32_t h = 0; h < cache.n_head_kv(); ++h) {
      for (int32_t e = 0; e < cache.capacity(); ++e) {
        for (int32_t d = 0; d < cache.head_dim(); ++d) {
          cache.k(l, h, e)[d] = entry_value(base, l, h, e, d);
          cache.v(l, h, e)[d] = -entry_value(base, l, h, e, d);
        }
      }
    }
  }
}

TEST(KvCache, ExtendFromCopiesTheOtherCachesEntriesAfterItsOwn) {
  KvCache src(small_config(), 10), dst(small_config(), 8);
  fill(src, 0.5f);
  fill(dst, 10000.5f);
  src.advance(7);
  dst.advance(2);
  dst.extend_from(src, 6);
  EXPECT_EQ(dst.length(), 6);
  for (int32_t l = 0; l < 3; ++l) {
    for (int32_t h = 0; h < 2; ++h) {
      for (int32_t e = 0; e < 8; ++e) {
        for (int32_t d = 0; d < 8; ++d) {
          // Entries 2..5 come from src; dst's own before them and the rest after stay as they were.
          const float want = entry_value(e >= 2 && e < 6 ? 0.5f : 10000.5f, l, h, e, d);
          EXPECT_EQ(dst.k(l, h, e)[d], want) << l << " " << h << " " << e;
          EXPECT_EQ(dst.v(l, h, e)[d], -want) << l << " " << h << " " << e;
        }
      }
    }
  }
  dst.extend_from(src, 6);  // nothing to copy
  EXPECT_EQ(dst.length(), 6);
  EXPECT_THROW(dst.extend_from(src, 5), Error);  // behind its own length
  EXPECT_THROW(dst.extend_from(src, 9), Error);  // past its capacity
  KvCache small(small_config(), 4);
  KvCache wide(small_config(), 8);
  EXPECT_THROW(wide.extend_from(small, 5), Error);  // past the source's capacity
  ModelConfig other = small_config();
  other.head_dim = 4;
  KvCache narrow(other, 8);
  EXPECT_THROW(wide.extend_from(narrow, 1), Error);
  EXPECT_EQ(wide.length(), 0);
}

TEST(KvCache, F16PartsStoreRoundedValuesInHalfTheBytes) {
  const KvTypes f16{KvType::F16, KvType::F16};
  KvCache full(small_config(), 10), half(small_config(), 10, f16),
      mixed(small_config(), 10, {KvType::F16, KvType::F32});
  EXPECT_EQ(half.bytes() * 2, full.bytes());
  EXPECT_EQ(mixed.bytes() * 4, full.bytes() * 3);
  EXPECT_EQ(KvCache::bytes_for(small_config(), 10, f16), half.bytes());
  EXPECT_EQ(KvCache::bytes_for(small_config(), 10), full.bytes());
  std::vector<float> k(8), v(8);
  for (int32_t d = 0; d < 8; ++d) {
    k[static_cast<size_t>(d)] = 1.0f / 3.0f + static_cast<float>(d);
    v[static_cast<size_t>(d)] = -70000.0f * static_cast<float>(d);  // past fp16: -inf
  }
  half.store(2, 1, 7, k.data(), v.data());
  mixed.store(2, 1, 7, k.data(), v.data());
  for (int32_t d = 0; d < 8; ++d) {
    EXPECT_EQ(half.k16(2, 1, 7)[d], fp32_to_fp16(k[static_cast<size_t>(d)]));
    EXPECT_EQ(half.v16(2, 1, 7)[d], fp32_to_fp16(v[static_cast<size_t>(d)]));
    EXPECT_EQ(mixed.k16(2, 1, 7)[d], fp32_to_fp16(k[static_cast<size_t>(d)]));
    EXPECT_EQ(mixed.v(2, 1, 7)[d], v[static_cast<size_t>(d)]);  // the f32 part keeps it
  }
  EXPECT_TRUE(std::isinf(fp16_to_fp32(half.v16(2, 1, 7)[7])));
  // Prefix copies between f16 caches copy the bits; between types they are refused.
  KvCache other(small_config(), 12, f16);
  half.advance(8);
  other.extend_from(half, 8);
  EXPECT_EQ(std::memcmp(other.k16(2, 1, 7), half.k16(2, 1, 7), 8 * sizeof(uint16_t)), 0);
  EXPECT_EQ(std::memcmp(other.v16(2, 1, 7), half.v16(2, 1, 7), 8 * sizeof(uint16_t)), 0);
  full.advance(8);
  EXPECT_THROW(KvCache(small_config(), 12).extend_from(half, 8), Error);
  EXPECT_THROW(KvCache(small_config(), 12, f16).extend_from(full, 8), Error);
  EXPECT_EQ(parse_kv_type("f16"), KvType::F16);
  EXPECT_EQ(parse_kv_type("f32"), KvType::F32);
  EXPECT_FALSE(parse_kv_type("q8_0").has_value());
}

}  // namespace
}  // namespace specdec
