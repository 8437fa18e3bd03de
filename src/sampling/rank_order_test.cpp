#include "sampling/rank_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace specdec {
namespace {

// The k first ids of a full sort by RanksBefore, as a set (select_top_k leaves them unordered).
std::vector<int32_t> reference_top_k(const std::vector<float>& logits, int32_t k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), RanksBefore{logits.data()});
  ids.resize(static_cast<size_t>(k));
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(RankOrder, HigherLogitFirstThenLowerId) {
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, -INFINITY, 2.0f};
  const RanksBefore before{l.data()};
  EXPECT_TRUE(before(1, 4));
  EXPECT_TRUE(before(1, 2));  // a tie goes to the lower id
  EXPECT_FALSE(before(2, 1));
  EXPECT_FALSE(before(1, 1));  // strict
  EXPECT_TRUE(before(0, 3));   // -inf ranks last
}

TEST(RankOrder, SelectTopKMatchesAFullSortWithTies) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> coarse(0, 12);  // many ties
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + static_cast<size_t>(trial * 37 % 900);
    std::vector<float> l(n);
    for (float& x : l) x = static_cast<float>(coarse(gen)) * 0.5f;
    if (trial % 5 == 0) l[n / 2] = -INFINITY;
    // Small k takes the heap scan, large k (k * 8 > n) the quickselect.
    for (const auto k : {int32_t{1}, static_cast<int32_t>(std::min<size_t>(n, 7)),
                         static_cast<int32_t>(n / 2 + 1), static_cast<int32_t>(n)}) {
      std::vector<int32_t> got;
      select_top_k(l, k, got);
      ASSERT_EQ(got.size(), static_cast<size_t>(k));
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, reference_top_k(l, k)) << "n " << n << " k " << k;
    }
  }
}

}  // namespace
}  // namespace specdec
