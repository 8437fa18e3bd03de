// --draft-max and the default gamma (cli/engine_setup.h).
#include "cli/engine_setup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/arg_parser.h"
#include "common/error.h"

namespace specdec::cli {
namespace {

int32_t parse_draft_max(const std::vector<std::string>& args) {
  int32_t draft_max = 0;
  ArgParser p("test", "");
  add_draft_max_option(p, draft_max, "gamma");
  p.parse(args);
  return draft_max;
}

TEST(DraftMaxOption, StaysUnsetUnlessGiven) {
  EXPECT_EQ(parse_draft_max({}), 0);
  EXPECT_EQ(parse_draft_max({"--draft-max", "6"}), 6);
  EXPECT_EQ(parse_draft_max({"--draft", "1"}), 1);
  EXPECT_EQ(parse_draft_max({"--draft-max", "64"}), 64);
}

TEST(DraftMaxOption, RefusesValuesOutOfRange) {
  for (const char* bad : {"0", "65", "-1", "4x", ""}) {
    EXPECT_THROW(parse_draft_max({"--draft-max", bad}), Error) << bad;
  }
}

TEST(DraftMaxOption, HelpNamesBothDefaults) {
  int32_t draft_max = 0;
  ArgParser p("test", "");
  add_draft_max_option(p, draft_max, "gamma");
  const std::string help = p.help();
  EXPECT_NE(help.find("default: 4 at temperature 0 with a draft model, 8 otherwise"),
            std::string::npos)
      << help;
}

TEST(DraftMaxFor, GreedyModelDraftsStopEarlierUnlessToldOtherwise) {
  EXPECT_EQ(draft_max_for(0, true, true), kDefaultGreedyDraftMax);
  EXPECT_EQ(draft_max_for(0, false, true), kDefaultDraftMax);
  EXPECT_EQ(draft_max_for(0, true, false), kDefaultDraftMax);  // prompt lookup alone
  EXPECT_EQ(draft_max_for(7, true, true), 7);
  EXPECT_EQ(draft_max_for(2, false, false), 2);
  EXPECT_LT(kDefaultGreedyDraftMax, kDefaultDraftMax);
}

}  // namespace
}  // namespace specdec::cli
