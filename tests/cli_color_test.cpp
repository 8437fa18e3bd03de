// `specdec run --color`: the ANSI escapes appear only when asked for (or on a terminal), and
// removing them leaves exactly the plain run's text, for draft-model, prompt-lookup and
// target-only runs.
#include <gtest/gtest.h>

#include <regex>

#include "support/cli_runner.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

using testing::CliResult;
using testing::run_cli;
using testing::run_cli_env;

std::string strip_escapes(const std::string& s) {
  return std::regex_replace(s, std::regex("\x1b\\[[0-9;]*m"), "");
}

class CliColor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    spec.n_ctx = 128;
    target_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("target.gguf")));
    spec.seed = 2;
    spec.n_layer = 1;
    draft_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("draft.gguf")));
  }
  static std::vector<std::string> args(std::vector<std::string> extra) {
    std::vector<std::string> a = {"run", "-m", *target_, "-p", "hello",        "-n",     "24",
                                  "-t",  "1",  "-s",     "3",  "--ignore-eos", "--temp", "0.8"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static std::string* target_;
  static std::string* draft_;
};
std::string* CliColor::target_ = nullptr;
std::string* CliColor::draft_ = nullptr;

TEST_F(CliColor, AlwaysPaintsAndStripsToThePlainText) {
  for (const std::vector<std::string>& drafter :
       {std::vector<std::string>{"-md", *draft_, "--draft-max", "3"},
        std::vector<std::string>{"--draft-ngram", "--ngram-policy", "fixed", "--draft-max", "4"},
        std::vector<std::string>{}}) {
    std::vector<std::string> plain_args = args(drafter);
    const CliResult plain = run_cli(plain_args);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out.find('\x1b'), std::string::npos);
    EXPECT_EQ(plain.err.find("colors:"), std::string::npos);

    plain_args.push_back("--color=always");
    const CliResult painted = run_cli(plain_args);
    ASSERT_EQ(painted.exit_code, 0) << painted.err;
    EXPECT_EQ(strip_escapes(painted.out), plain.out);
    EXPECT_NE(painted.err.find("colors: "), std::string::npos) << painted.err;
    if (drafter.empty()) {
      EXPECT_EQ(painted.out, plain.out);  // target steps keep the default colour
    } else if (drafter[0] == "-md") {
      // Every round ends in a correction (yellow) or a bonus (cyan): escapes must be there,
      // and the last one resets the colour before the final newline.
      EXPECT_TRUE(painted.out.find("\x1b[33m") != std::string::npos ||
                  painted.out.find("\x1b[36m") != std::string::npos)
          << painted.out;
      const size_t last = painted.out.rfind('\x1b');
      EXPECT_EQ(painted.out.compare(last, 4, "\x1b[0m"), 0);
    }
  }
}

TEST_F(CliColor, AutoAndNeverStayPlainOffATerminal) {
  const CliResult plain = run_cli(args({"-md", *draft_}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* flag : {"--color", "--color=auto", "--color=never"}) {
    const CliResult r = run_cli(args({"-md", *draft_, flag}));  // stdout is a pipe here
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out) << flag;
    EXPECT_EQ(r.err.find("colors:"), std::string::npos) << flag;
  }
  // NO_COLOR does not override an explicit --color=always.
  const CliResult forced = run_cli_env({"NO_COLOR=1"}, args({"-md", *draft_, "--color=always"}));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find('\x1b'), std::string::npos);
  // -q drops the legend with the summary.
  const CliResult quiet = run_cli(args({"-md", *draft_, "--color=always", "-q"}));
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;
}

TEST_F(CliColor, BadValuesAndHelp) {
  const CliResult bad = run_cli(args({"--color=sometimes"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--color must be never, auto or always, got 'sometimes'"),
            std::string::npos)
      << bad.err;
  const CliResult help = run_cli({"run", "--help"});
  EXPECT_NE(help.out.find("--color[=WHEN]"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace specdec
