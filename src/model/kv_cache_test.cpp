#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "tensor/q8_rows.h"
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
  EXPECT_EQ(parse_kv_type("q8_0"), KvType::Q8_0);
  EXPECT_FALSE(parse_kv_type("q4_0").has_value());
  EXPECT_FALSE(parse_kv_type("F16").has_value());
}

// q8_0 parts: 34 bytes per 32 values (keys in whole tiles of 16 slots), a clear error for heads
// that blocks of 32 do not divide, and prefix copies that copy exactly the copied slots' rows
// (a key tile's other lanes belong to the destination's own slots).
TEST(KvCache, Q8PartsStoreBlocksOf32AndCopyPrefixesRowByRow) {
  ModelConfig c = small_config();
  c.head_dim = 64;
  const KvTypes q8{KvType::Q8_0, KvType::Q8_0};
  KvCache cache(c, 20, q8), full(c, 20);
  // Keys: 2 tiles (32 slots) of 17 * 64 bytes per (layer, head); values 20 rows of 68 bytes.
  EXPECT_EQ(cache.bytes(), 3u * 2 * (2 * 17 * 64 + 20 * 68));
  EXPECT_EQ(KvCache::bytes_for(c, 20, q8), cache.bytes());
  EXPECT_EQ(KvCache::bytes_for(c, 20, {KvType::F32, KvType::Q8_0}),
            3u * 2 * (20 * 64 * 4 + 20 * 68));
  EXPECT_STREQ(kv_type_name(KvType::Q8_0), "q8_0");
  EXPECT_EQ(kv_types_name(q8), "q8_0");
  EXPECT_EQ(kv_types_name({}), "f32");
  EXPECT_EQ(kv_types_name({KvType::Q8_0, KvType::F16}), "K q8_0, V f16");
  EXPECT_THROW(KvCache(small_config(), 10, {KvType::F32, KvType::Q8_0}), Error);  // head 8

  std::vector<float> k(64), v(64);
  const auto fill = [&](int32_t s) {
    for (int32_t d = 0; d < 64; ++d) {
      k[static_cast<size_t>(d)] = std::sin(static_cast<float>(s * 64 + d));
      v[static_cast<size_t>(d)] = std::cos(static_cast<float>(s * 64 + d)) * 3.0f;
    }
  };
  for (int32_t s = 0; s < 20; ++s) {
    fill(s);
    cache.store(2, 1, s, k.data(), v.data());
  }
  cache.advance(20);
  fill(17);
  std::vector<float> row(64);
  dequantize_q8_rows(cache.v8(2, 1, 17), 1, 64, 0, 64, row.data());
  const uint8_t* tile = cache.k8_tiles(2, 1) + q8_tile_bytes(64);  // slots 16..31
  for (int32_t d = 0; d < 64; ++d) {
    const float step_k = q8_tile_scale(tile, 64, 1, d / 32);
    EXPECT_NEAR(step_k * static_cast<float>(q8_tile_value(tile, 64, 1, d)),
                k[static_cast<size_t>(d)], 0.51f * step_k);
    EXPECT_NEAR(row[static_cast<size_t>(d)], v[static_cast<size_t>(d)], 3.0f / 127);
  }

  // A copy of slots 10..17 into a cache that holds its own slots 0..9 (here: other values).
  KvCache other(c, 24, q8);
  std::vector<float> zeros(64, 0.5f);
  for (int32_t s = 0; s < 10; ++s) other.store(2, 1, s, zeros.data(), zeros.data());
  other.advance(10);
  other.extend_from(cache, 18);
  EXPECT_EQ(other.length(), 18);
  const size_t tb = q8_tile_bytes(64), vb = q8_row_bytes(64);
  for (int32_t s = 0; s < 18; ++s) {
    const uint8_t* mine = other.k8_tiles(2, 1) + (s / 16) * tb;
    const uint8_t* theirs = cache.k8_tiles(2, 1) + (s / 16) * tb;
    for (int32_t d = 0; d < 64; ++d) {
      const int32_t want =
          s < 10 ? q8_tile_value(mine, 64, s % 16, 0) : q8_tile_value(theirs, 64, s % 16, d);
      EXPECT_EQ(q8_tile_value(mine, 64, s % 16, d), want) << s << " " << d;
    }
    if (s >= 10) {
      EXPECT_EQ(q8_tile_scale(mine, 64, s % 16, 1), q8_tile_scale(theirs, 64, s % 16, 1));
      EXPECT_EQ(std::memcmp(other.v8(2, 1, s), cache.v8(2, 1, s), vb), 0);
    } else {
      EXPECT_EQ(q8_tile_value(mine, 64, s % 16, 3), 127);  // still its own 0.5s
    }
  }
  EXPECT_THROW(KvCache(c, 24).extend_from(cache, 18), Error);  // another type
}

// Fills every layer and head of the first n slots with values that differ per slot, layer,
// head and dimension.
void fill_cache(KvCache& cache, int32_t n, float shift) {
  std::vector<float> k(static_cast<size_t>(cache.head_dim())), v(k.size());
  for (int32_t l = 0; l < cache.n_layer(); ++l) {
    for (int32_t h = 0; h < cache.n_head_kv(); ++h) {
      for (int32_t s = 0; s < n; ++s) {
        for (size_t d = 0; d < k.size(); ++d) {
          const auto x = static_cast<float>(((l * 7 + h) * 131 + s) * 64 + static_cast<int>(d));
          k[d] = std::sin(x + shift);
          v[d] = std::cos(x * 0.5f + shift) * 2.0f;
        }
        cache.store(l, h, s, k.data(), v.data());
      }
    }
  }
  cache.advance(n);
}

std::vector<uint8_t> saved(const KvCache& cache, int32_t n) {
  std::vector<uint8_t> out;
  cache.save_rows(n, [&](const void* p, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + bytes);
  });
  return out;
}

TEST(KvCache, SavedRowsLoadBackAsTheSameBitsForEveryType) {
  ModelConfig c = small_config();
  c.head_dim = 32;
  for (const KvTypes types :
       {KvTypes{}, KvTypes{KvType::F16, KvType::F16}, KvTypes{KvType::Q8_0, KvType::Q8_0},
        KvTypes{KvType::Q8_0, KvType::F32}}) {
    SCOPED_TRACE(kv_types_name(types));
    KvCache cache(c, 40, types);
    fill_cache(cache, 37, 0.0f);
    // 19 entries: a whole q8_0 key tile and part of the next.
    const std::vector<uint8_t> bytes = saved(cache, 19);
    EXPECT_EQ(bytes.size(), cache.row_bytes(19));
    // Into a cache that held other values: what it holds past 19 is no longer its own.
    KvCache back(c, 24, types);
    fill_cache(back, 24, 1.0f);
    size_t at = 0;
    back.load_rows(19, [&](void* p, size_t n) {
      ASSERT_LE(at + n, bytes.size());
      std::memcpy(p, bytes.data() + at, n);
      at += n;
    });
    EXPECT_EQ(at, bytes.size());
    EXPECT_EQ(back.length(), 19);
    EXPECT_EQ(saved(back, 19), bytes);
    // Each entry is the original's: copies of both, entry by entry, agree (a copy does not
    // carry the lanes of a q8_0 key tile past its length, which the load did).
    KvCache from_original(c, 40, types), from_loaded(c, 40, types);
    from_original.extend_from(cache, 19);
    from_loaded.extend_from(back, 19);
    EXPECT_EQ(saved(from_loaded, 19), saved(from_original, 19));
    // The rows written after a load are the cache's own again.
    std::vector<float> k(32, 0.25f);
    back.store(0, 0, 19, k.data(), k.data());
    back.advance(1);
    EXPECT_EQ(back.length(), 20);
  }
  KvCache cache(small_config(), 10);
  fill_cache(cache, 4, 0.0f);
  EXPECT_EQ(saved(cache, 0).size(), 0u);
  EXPECT_THROW(saved(cache, 5), Error);  // more than it holds
  EXPECT_THROW(cache.load_rows(11, [](void*, size_t) {}), Error);
  // A reader that fails leaves the cache empty.
  EXPECT_THROW(cache.load_rows(3, [](void*, size_t) { fail("short file"); }), Error);
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace specdec
