#include "model/vocab_subset.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace specdec {
namespace {

using Ranges = std::vector<std::pair<int32_t, int32_t>>;

TEST(VocabSubset, RoundsOutToGroupsOfEightAndMergesNeighbours) {
  const std::vector<int32_t> ids = {0, 1, 2, 9, 15, 16, 40, 99, 98};
  const VocabSubset s = VocabSubset::from_ids(ids, 101);
  EXPECT_EQ(s.ranges(), (Ranges{{0, 24}, {40, 48}, {96, 101}}));
  EXPECT_EQ(s.width(), 24 + 8 + 5);
  ASSERT_EQ(static_cast<int32_t>(s.ids().size()), s.width());
  EXPECT_EQ(s.ids().front(), 0);
  EXPECT_EQ(s.ids()[24], 40);
  EXPECT_EQ(s.ids().back(), 100);
  EXPECT_TRUE(std::is_sorted(s.ids().begin(), s.ids().end()));
  EXPECT_EQ(s.head_rows(), 101);
}

TEST(VocabSubset, AFullPrefixIsOneRange) {
  std::vector<int32_t> ids(4096);
  for (int32_t i = 0; i < 4096; ++i) ids[static_cast<size_t>(i)] = i;
  const VocabSubset s = VocabSubset::from_ids(ids, 151936);
  EXPECT_EQ(s.ranges(), (Ranges{{0, 4096}}));
}

TEST(VocabSubset, RejectsBadIds) {
  EXPECT_THROW(VocabSubset::from_ids(std::vector<int32_t>{}, 10), Error);
  EXPECT_THROW(VocabSubset::from_ids(std::vector<int32_t>{10}, 10), Error);
  EXPECT_THROW(VocabSubset::from_ids(std::vector<int32_t>{-1}, 10), Error);
}

}  // namespace
}  // namespace specdec
