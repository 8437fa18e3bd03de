#include "common/utf8.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

TEST(Utf8, EncodesEachLengthAndDecodesItBack) {
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) append_utf8(s, cp);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(lenient_codepoints(s), (std::vector<uint32_t>{0x41, 0xE9, 0x20AC, 0x1F600}));
}

TEST(Utf8, LenientDecodingReplacesBytesThatStartNothing) {
  // A stray continuation byte and a truncated sequence each give U+FFFD, byte by byte.
  EXPECT_EQ(lenient_codepoints("a\x80"
                               "b\xE2\x82"),
            (std::vector<uint32_t>{0x61, 0xFFFD, 0x62, 0xFFFD, 0xFFFD}));
  // No overlong check, as in llama.cpp.
  EXPECT_EQ(lenient_codepoints("\xC0\x80"), (std::vector<uint32_t>{0}));
}

}  // namespace
}  // namespace specdec
