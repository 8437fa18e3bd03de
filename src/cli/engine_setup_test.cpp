// --draft-max and the default gamma, the KV cache type flags (cli/engine_setup.h).
#include "cli/engine_setup.h"

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <tuple>
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

namespace specdec::cli {
namespace {

// llama.cpp's speculative flags under both its spellings (recent llama-server's --spec-draft-*
// and the older --draft-*), into the options the engine takes.
TEST(LlamaCppDraftFlags, BothSpellingsSetTheSameOptions) {
  const auto parse = [](const std::vector<std::string>& args) {
    DraftModelOptions o;
    int32_t draft_max = 0;
    DraftKvTypeFlags kv;
    ArgParser p("test", "");
    add_draft_model_options(p, o);
    add_draft_max_option(p, draft_max, "gamma");
    add_draft_kv_type_options(p, kv);
    p.parse(args);
    return std::tuple{o, draft_max, kv.resolve(KvTypes{})};
  };
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--spec-draft-n-max", "8", "--spec-draft-n-min", "2", "--spec-draft-p-min", "0.75",
            "--spec-draft-type-k", "q8_0", "--spec-draft-type-v", "f16"},
           {"--draft-max", "8", "--draft-min", "2", "--draft-p-min", "0.75", "-ctkd", "q8_0",
            "-ctvd", "f16"},
           {"--draft-n", "8", "--draft-n-min", "2", "--draft-p-min", "0.75", "--cache-type-k-draft",
            "q8_0", "--cache-type-v-draft", "f16"}}) {
    const auto [o, draft_max, kv] = parse(args);
    EXPECT_EQ(draft_max, 8) << args[0];
    EXPECT_EQ(o.length.min_drafts, 2) << args[0];
    EXPECT_FLOAT_EQ(o.length.p_min, 0.75f) << args[0];
    ASSERT_TRUE(kv.has_value());
    EXPECT_EQ(kv->k, KvType::Q8_0);
    EXPECT_EQ(kv->v, KvType::F16);
  }
  EXPECT_EQ(std::get<0>(parse({"-cd", "512"})).context, 512);
  EXPECT_EQ(std::get<0>(parse({"--ctx-size-draft", "256"})).context, 256);
  EXPECT_EQ(std::get<0>(parse({})).length.min_drafts, 0);
  EXPECT_EQ(std::get<0>(parse({})).length.p_min, 0.0f);
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--draft-p-min", "1.5"},
                                                               {"--spec-draft-p-min", "-0.1"},
                                                               {"--draft-min", "65"},
                                                               {"--spec-draft-n-min", "-1"}}) {
    EXPECT_THROW(parse(bad), Error) << bad[0] << " " << bad[1];
  }
}

TEST(SpecType, ParsesLlamaCppsTypesAndRefusesTheOnesNeedingHeads) {
  const SpecType none = parse_spec_type("none");
  EXPECT_TRUE(none.given && none.none && !none.model && !none.lookup);
  const SpecType simple = parse_spec_type("draft-simple");
  EXPECT_TRUE(simple.model && !simple.lookup);
  const SpecType both = parse_spec_type("draft-simple,ngram-mod");
  EXPECT_TRUE(both.model && both.lookup);
  for (const char* lookup :
       {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"}) {
    EXPECT_TRUE(parse_spec_type(lookup).lookup) << lookup;
  }
  const auto message = [](const std::string& list) {
    try {
      parse_spec_type(list);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("draft-mtp").find("draft heads built into a model"), std::string::npos);
  EXPECT_NE(message("draft-eagle3").find("draft heads"), std::string::npos);
  EXPECT_NE(message("ngram-magic").find("unknown type 'ngram-magic'"), std::string::npos);
  EXPECT_NE(message("none,draft-simple").find("none cannot be combined"), std::string::npos);
  EXPECT_NE(message("").find("--spec-type"), std::string::npos);
}

TEST(SpecType, ChoosesTheDrafters) {
  std::ostringstream log;
  const auto apply = [&log](const std::string& list, std::string& draft, DraftModelOptions& o) {
    return apply_spec_type(parse_spec_type(list), o, draft, log);
  };
  {  // none: the draft is not loaded, and the log says so
    DraftModelOptions o;
    std::string draft = "d.gguf";
    EXPECT_FALSE(apply("none", draft, o));
    EXPECT_TRUE(draft.empty());
    EXPECT_FALSE(o.hybrid.on);
    EXPECT_NE(log.str().find("d.gguf is not loaded"), std::string::npos) << log.str();
  }
  {  // draft-simple: the model alone; with an ngram type: the hybrid
    DraftModelOptions o;
    std::string draft = "d.gguf";
    EXPECT_FALSE(apply("draft-simple", draft, o));
    EXPECT_EQ(draft, "d.gguf");
    EXPECT_FALSE(o.hybrid.on);
    DraftModelOptions h;
    h.hybrid.on = false;
    EXPECT_FALSE(apply("draft-simple,ngram-mod", draft, h));
    EXPECT_TRUE(h.hybrid.on);
    std::string none;
    EXPECT_THROW(apply("draft-simple", none, o), Error);  // needs -md
  }
  {  // ngram types alone: prompt lookup; the draft is not loaded
    DraftModelOptions o;
    std::string draft = "d.gguf";
    EXPECT_TRUE(apply("ngram-mod", draft, o));
    EXPECT_TRUE(draft.empty());
    EXPECT_FALSE(o.hybrid.on);
  }
  {  // an explicit --draft-hybrid or --no-draft-hybrid must agree with the list
    DraftModelOptions o;
    o.hybrid = {true, true};
    std::string draft = "d.gguf";
    EXPECT_THROW(apply("draft-simple", draft, o), Error);
    o.hybrid = {false, true};
    EXPECT_THROW(apply("draft-simple,ngram-simple", draft, o), Error);
    o.hybrid = {true, true};
    EXPECT_NO_THROW(apply("draft-simple,ngram-simple", draft, o));
    EXPECT_THROW(apply("none", draft, o), Error);
  }
  DraftModelOptions untouched;
  std::string draft = "d.gguf";
  EXPECT_FALSE(apply_spec_type(SpecType{}, untouched, draft, log));
  EXPECT_EQ(draft, "d.gguf");
  EXPECT_EQ(untouched.hybrid.on, kDefaultDraftHybrid);
}

// The draft's device and thread flags are accepted and noted, never silently dropped.
TEST(DeviceOptions, DraftAndThreadFlagsAreAcceptedWithANote) {
  DeviceOptions d;
  ArgParser p("test", "");
  add_device_options(p, d);
  p.parse(std::vector<std::string>{"-ngld", "99", "--spec-draft-device", "CUDA0", "-td", "4", "-tb",
                                   "2", "-dev", "none", "--spec-draft-ngl", "0"});
  std::ostringstream log;
  apply_device_options(d, log);
  const std::string s = log.str();
  EXPECT_NE(s.find("-ngld 99 changes nothing"), std::string::npos) << s;
  EXPECT_NE(s.find("--device-draft CUDA0 changes nothing"), std::string::npos) << s;
  EXPECT_NE(s.find("--threads-draft 4 changes nothing"), std::string::npos) << s;
  EXPECT_NE(s.find("--threads-batch 2 changes nothing"), std::string::npos) << s;
  EXPECT_EQ(s.find("--device none"), std::string::npos) << s;  // none: what specdec does
  EXPECT_EQ(s.find("-ngld 0"), std::string::npos) << s;
  DeviceOptions bad;
  ArgParser q("test", "");
  add_device_options(q, bad);
  EXPECT_THROW(q.parse(std::vector<std::string>{"-td", "0"}), Error);
  EXPECT_THROW(q.parse(std::vector<std::string>{"-ngld", "all-of-them"}), Error);
}

}  // namespace
}  // namespace specdec::cli
