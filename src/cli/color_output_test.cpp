#include "cli/color_output.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "common/error.h"

namespace specdec::cli {
namespace {

std::string strip_escapes(const std::string& s) {
  return std::regex_replace(s, std::regex("\x1b\\[[0-9;]*m"), "");
}

TEST(ColorOutput, ModesParseAndAutoFollowsTheTerminal) {
  EXPECT_EQ(parse_color_mode(""), ColorMode::Auto);
  EXPECT_EQ(parse_color_mode("auto"), ColorMode::Auto);
  EXPECT_EQ(parse_color_mode("always"), ColorMode::Always);
  EXPECT_EQ(parse_color_mode("never"), ColorMode::Never);
  EXPECT_THROW(parse_color_mode("yes"), Error);
  EXPECT_TRUE(color_enabled(ColorMode::Always, false, "1", "dumb"));
  EXPECT_FALSE(color_enabled(ColorMode::Never, true, nullptr, "xterm"));
  EXPECT_TRUE(color_enabled(ColorMode::Auto, true, nullptr, "xterm"));
  EXPECT_TRUE(color_enabled(ColorMode::Auto, true, "", nullptr));  // empty NO_COLOR: unset
  EXPECT_FALSE(color_enabled(ColorMode::Auto, false, nullptr, "xterm"));
  EXPECT_FALSE(color_enabled(ColorMode::Auto, true, "1", "xterm"));
  EXPECT_FALSE(color_enabled(ColorMode::Auto, true, nullptr, "dumb"));
}

TEST(ColorOutput, EscapesOnlyWhereTheOriginChangesAndStripToThePlainText) {
  std::ostringstream out;
  ColorWriter w(out);
  w.write("Hel", TokenOrigin::Draft);
  w.write("lo", TokenOrigin::Draft);  // same colour: no escape in between
  w.write(",", TokenOrigin::Correction);
  w.write(" wor", TokenOrigin::Target);
  w.write("", TokenOrigin::Bonus);  // empty: nothing, not even an escape
  w.write("ld", TokenOrigin::Bonus);
  w.finish();
  EXPECT_EQ(out.str(), "\x1b[32mHello\x1b[33m,\x1b[0m wor\x1b[36mld\x1b[0m");
  EXPECT_EQ(strip_escapes(out.str()), "Hello, world");

  std::ostringstream plain;
  ColorWriter p(plain);
  p.write("only target", TokenOrigin::Target);
  p.finish();
  EXPECT_EQ(plain.str(), "only target");  // nothing to reset
}

TEST(ColorOutput, LegendNamesEveryOriginInItsColour) {
  const std::string legend = color_legend();
  EXPECT_EQ(legend.back(), '\n');
  EXPECT_EQ(std::count(legend.begin(), legend.end(), '\n'), 1);
  for (TokenOrigin o : {TokenOrigin::Draft, TokenOrigin::Correction, TokenOrigin::Bonus}) {
    EXPECT_NE(legend.find(origin_escape(o)), std::string::npos) << token_origin_name(o);
  }
  EXPECT_NE(strip_escapes(legend).find("accepted draft | correction"), std::string::npos);
}

}  // namespace
}  // namespace specdec::cli
