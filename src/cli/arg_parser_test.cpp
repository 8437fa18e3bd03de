#include "cli/arg_parser.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace specdec::cli {
namespace {

struct Opts {
  std::string model;
  int32_t n = 16;
  float temp = 0.8f;
  bool verbose = false;
  std::vector<std::string> stops;
  uint64_t seed = 7;
};

ArgParser make_parser(Opts& o) {
  ArgParser p("specdec run [options]", "test parser");
  p.add_string({"-m", "--model"}, "FILE", "model path", o.model);
  p.add_int({"-n", "--n-predict"}, "N", "tokens", o.n, -1, 1000);
  p.add_float({"--temp"}, "T", "temperature", o.temp, 0.0, 10.0);
  p.add_flag({"-v", "--verbose"}, "verbose", o.verbose);
  p.add_strings({"--stop"}, "S", "stop string", o.stops);
  p.add_u64({"-s", "--seed"}, "SEED", "seed", o.seed);
  return p;
}

bool parse(ArgParser& p, std::vector<std::string> args) { return p.parse(args); }

TEST(ArgParser, ParsesShortLongAndInlineValues) {
  Opts o;
  ArgParser p = make_parser(o);
  EXPECT_TRUE(parse(p, {"-m", "a.gguf", "--n-predict=5", "--temp", "0.25", "-v", "--stop", "x",
                        "--stop", "y", "-s", "42"}));
  EXPECT_EQ(o.model, "a.gguf");
  EXPECT_EQ(o.n, 5);
  EXPECT_FLOAT_EQ(o.temp, 0.25f);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.stops, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(o.seed, 42u);
}

TEST(ArgParser, HelpReturnsFalseAndListsEveryOption) {
  Opts o;
  ArgParser p = make_parser(o);
  EXPECT_FALSE(parse(p, {"--help"}));
  std::string h = p.help();
  for (const char* name : {"--model", "--n-predict", "--temp", "--verbose", "--stop", "--seed"}) {
    EXPECT_NE(h.find(name), std::string::npos) << name;
  }
  EXPECT_NE(h.find("(default: 16)"), std::string::npos);
}

TEST(ArgParser, AHelpTextThatNamesItsDefaultIsNotGivenTheRawValueToo) {
  int32_t threads = 0;
  ArgParser p("prog", "help test");
  p.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", threads, 0, 64);
  const std::string h = p.help();
  EXPECT_NE(h.find("threads (default: all cores)\n"), std::string::npos) << h;
  EXPECT_EQ(h.find("(default: 0)"), std::string::npos) << h;
}

void expect_error(std::vector<std::string> args, const std::string& fragment) {
  Opts o;
  ArgParser p = make_parser(o);
  try {
    parse(p, args);
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ArgParser, RejectsBadInput) {
  expect_error({"--bogus"}, "unknown argument '--bogus'");
  expect_error({"-n"}, "-n needs a value");
  expect_error({"-n", "12x"}, "expects an integer, got '12x'");
  expect_error({"-n", "5000"}, "must be in [-1, 1000]");
  expect_error({"--temp", "hot"}, "expects a number, got 'hot'");
  expect_error({"--temp", "-1"}, "must be in [0, 10]");
  expect_error({"--temp", "nan"}, "expects a number");
  expect_error({"--verbose=1"}, "takes no value");
  expect_error({"stray"}, "unexpected argument 'stray'");
  expect_error({"-s", "-3"}, "must be >= 0");
}

TEST(ArgParser, AlsoWhenGivenRunsAfterTheValueIsTaken) {
  Opts o;
  ArgParser p = make_parser(o);
  int given = 0;
  p.also_when_given([&] { given += o.seed == 16 ? 1 : 100; });  // the last option: --seed
  EXPECT_TRUE(parse(p, {"-n", "3"}));
  EXPECT_EQ(given, 0);
  EXPECT_TRUE(parse(p, {"--seed", "16"}));
  EXPECT_EQ(given, 1);
}

// An error names the flag as the command line spelled it, not by the option's first name.
TEST(ArgParser, ErrorsNameTheSpellingGiven) {
  Opts o;
  ArgParser p = make_parser(o);
  const auto message = [&p](std::vector<std::string> args) {
    try {
      p.parse(args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({"--n-predict", "5000"}), "--n-predict must be in [-1, 1000], got 5000");
  EXPECT_EQ(message({"-n", "5000"}), "-n must be in [-1, 1000], got 5000");
  EXPECT_EQ(message({"--seed", "x"}), "--seed expects an integer, got 'x'");
}

TEST(ArgParser, OptionalValuesComeOnlyAfterAnEqualsSign) {
  std::vector<std::string> seen;
  std::string model;
  ArgParser p("specdec run [options]", "test parser");
  p.add_optional_value({"--color"}, "WHEN", "colour",
                       [&](const std::string& v) { seen.push_back(v); });
  p.add_string({"-m"}, "FILE", "model", model);
  EXPECT_TRUE(parse(p, {"--color", "-m", "a.gguf", "--color=always", "--color="}));
  EXPECT_EQ(seen, (std::vector<std::string>{"", "always", ""}));
  EXPECT_EQ(model, "a.gguf");                            // `--color` did not take `-m` as its value
  EXPECT_THROW(parse(p, {"--color", "always"}), Error);  // a stray argument, not a value
  EXPECT_NE(p.help().find("  --color[=WHEN] "), std::string::npos) << p.help();
}

}  // namespace
}  // namespace specdec::cli
