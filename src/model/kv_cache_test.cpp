#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "model/model.h"

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

}  // namespace
}  // namespace specdec
