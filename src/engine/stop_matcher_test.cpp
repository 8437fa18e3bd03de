#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

std::string feed_all(StopMatcher& m, const std::vector<std::string>& chunks) {
  std::string out;
  for (const auto& c : chunks) out += m.push(c);
  return out + m.finish();
}

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(feed_all(m, {"hello", " world"}), "hello world");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, CutsAtStopSplitAcrossChunksAndNeverEmitsPartOfIt) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("abc</"), "abc");  // "</" might start the stop string: held back
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d>tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "</end>");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("xST"), "x");
  EXPECT_EQ(m.push("AY"), "STAY");
  EXPECT_EQ(m.push("ST"), "");
  EXPECT_EQ(m.finish(), "ST");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(feed_all(m, {"hello world"}), "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

}  // namespace
}  // namespace specdec
