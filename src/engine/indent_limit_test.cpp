#include "engine/indent_limit.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace specdec {
namespace {

// The text kept when `pieces` arrive in turn.
std::string kept(int32_t min_indent, const std::vector<std::string>& pieces, bool* stopped) {
  IndentLimit limit(min_indent);
  std::string out;
  for (const std::string& p : pieces) out += p.substr(0, limit.push(p));
  *stopped = limit.stopped();
  return out;
}

TEST(IndentLimit, ALineIndentedLessThanTheBlockEndsTheTextBeforeItsFirstCharacter) {
  bool stopped = false;
  // The first line (the rest of the cursor's line) is never checked.
  EXPECT_EQ(kept(4, {"x = 1\n", "    y = 2\n", "  z = 3\n"}, &stopped), "x = 1\n    y = 2\n  ");
  EXPECT_TRUE(stopped);
  // A tab counts as one character of indentation, as in llama-server.
  EXPECT_EQ(kept(4, {"a\n", "\tb\n", "    c"}, &stopped), "a\n\t");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(kept(1, {"a\n", "\tb\n", " c"}, &stopped), "a\n\tb\n c");
  EXPECT_FALSE(stopped);
}

TEST(IndentLimit, TheCutMayFallInsideAPieceAndNothingFollowsIt) {
  bool stopped = false;
  EXPECT_EQ(kept(2, {"a\n  b\nc = 1\n  d"}, &stopped), "a\n  b\n");
  EXPECT_TRUE(stopped);
  IndentLimit limit(2);
  EXPECT_EQ(limit.push("a\nb"), 2u);
  EXPECT_EQ(limit.push("  more"), 0u);
}

TEST(IndentLimit, ABlankLineEndsTheTextAtItsNewline) {
  bool stopped = false;
  EXPECT_EQ(kept(2, {"a\n", "  b\n", "\n", "  c"}, &stopped), "a\n  b\n");
  EXPECT_TRUE(stopped);
}

TEST(IndentLimit, ZeroIsOff) {
  bool stopped = false;
  EXPECT_EQ(kept(0, {"a\n", "b\n", "\n"}, &stopped), "a\nb\n\n");
  EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace specdec
