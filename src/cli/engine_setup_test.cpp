// --draft-max and the default gamma, the KV cache type flags (cli/engine_setup.h).
#include "cli/engine_setup.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
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

// -ctk/-ctv set the target's types; -ctkd/-ctvd the draft's, a part not given following the
// target's, and nothing given leaves the draft on the target's types.
TEST(KvTypeOptions, TheDraftFollowsTheTargetPartByPartUnlessToldOtherwise) {
  const auto parse = [](const std::vector<std::string>& args) {
    KvTypes target;
    DraftKvTypeFlags draft;
    ArgParser p("test", "");
    add_kv_type_options(p, target);
    add_draft_kv_type_options(p, draft);
    p.parse(args);
    return std::pair{target, draft.resolve(target)};
  };
  const KvTypes q8{KvType::Q8_0, KvType::Q8_0};
  EXPECT_EQ(parse({}).second, std::nullopt);
  EXPECT_EQ(parse({"-ctk", "q8_0", "-ctv", "q8_0"}), std::pair(q8, std::optional<KvTypes>()));
  EXPECT_EQ(parse({"-ctkd", "q8_0", "-ctvd", "q8_0"}), std::pair(KvTypes{}, std::optional(q8)));
  EXPECT_EQ(parse({"-ctv", "f16", "--cache-type-k-draft", "q8_0"}).second,
            (KvTypes{KvType::Q8_0, KvType::F16}));
  EXPECT_EQ(parse({"-ctk", "f16", "--cache-type-v-draft", "f32"}).second,
            (KvTypes{KvType::F16, KvType::F32}));
  for (const char* flag : {"-ctkd", "-ctvd"}) {
    EXPECT_THROW(parse({flag, "q4_0"}), Error) << flag;
  }
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
