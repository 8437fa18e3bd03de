#include "cli/request_default_options.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace specdec::cli {
namespace {

using nlohmann::json;

json defaults_of(std::vector<std::string> args) {
  server::RequestDefaults d;
  ArgParser p("specdec serve", "test");
  add_request_default_options(p, d);
  EXPECT_TRUE(p.parse(args));
  check_request_default_options(d);
  return d.fields;
}

std::string error_of(std::vector<std::string> args) {
  try {
    defaults_of(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RequestDefaultOptions, NoFlagsNoDefaults) { EXPECT_EQ(defaults_of({}), json::object()); }

TEST(RequestDefaultOptions, LlamaServersFlagsBecomeTheRequestFieldsTheySet) {
  const json d = defaults_of({"--temp",
                              "0.7",
                              "--top-k",
                              "-1",
                              "--top-p",
                              "0.9",
                              "--min-p",
                              "0.05",
                              "-n",
                              "256",
                              "-s",
                              "42",
                              "--repeat-penalty",
                              "1.1",
                              "--repeat-last-n",
                              "-1",
                              "--mirostat",
                              "2",
                              "--ignore-eos",
                              "--samplers",
                              "penalties;top_k;temperature",
                              "-l",
                              "15+2.5",
                              "-l",
                              "7-100",
                              "--dry-multiplier",
                              "0.8",
                              "--dry-sequence-breaker",
                              "\\n",
                              "--dry-sequence-breaker",
                              "]"});
  EXPECT_DOUBLE_EQ(d["temperature"].get<double>(), 0.7);
  EXPECT_EQ(d["top_k"], 0);  // llama.cpp's "off" as a request spells it
  EXPECT_DOUBLE_EQ(d["top_p"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(d["min_p"].get<double>(), 0.05);
  EXPECT_EQ(d["max_tokens"], 256);
  EXPECT_EQ(d["seed"], 42);
  EXPECT_DOUBLE_EQ(d["repeat_penalty"].get<double>(), 1.1);
  EXPECT_EQ(d["repeat_last_n"], -1);
  EXPECT_EQ(d["mirostat"], 2);
  EXPECT_EQ(d["ignore_eos"], true);
  EXPECT_EQ(d["samplers"], json({"penalties", "top_k", "temperature"}));
  EXPECT_EQ(d["logit_bias"], json({{"15", 2.5}, {"7", -100.0}}));
  EXPECT_DOUBLE_EQ(d["dry_multiplier"].get<double>(), 0.8);
  EXPECT_EQ(d["dry_sequence_breakers"], json({"\n", "]"}));
  EXPECT_EQ(defaults_of({"--sampling-seq", "kt"})["samplers"], json({"top_k", "temperature"}));
  EXPECT_EQ(defaults_of({"--dry-sequence-breaker", "none"})["dry_sequence_breakers"],
            json::array());
}

TEST(RequestDefaultOptions, MinusOneMeansTheDefaultForSeedAndLength) {
  // llama-server's spellings of "a random seed" and "no limit": no default at all.
  EXPECT_EQ(defaults_of({"-s", "5", "-s", "-1", "-n", "8", "-n", "-1"}), json::object());
}

TEST(RequestDefaultOptions, ReasoningFlagsAsLlamaServersSetTheRequestFields) {
  EXPECT_EQ(
      defaults_of({"--reasoning-format", "none", "--reasoning-budget", "0"}),
      json({{"reasoning_format", "none"}, {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_EQ(defaults_of({"--reasoning-budget", "0", "--reasoning-budget", "-1"}), json::object());
  EXPECT_EQ(defaults_of({"--reasoning-budget", "512", "--reasoning-budget-message", "Done."}),
            json({{"reasoning_budget_tokens", 512}, {"reasoning_budget_message", "Done."}}));
  EXPECT_EQ(defaults_of({"--reasoning-budget", "0", "--reasoning-budget", "64"}),
            json({{"reasoning_budget_tokens", 64}}));
  EXPECT_EQ(defaults_of({"--reasoning-budget", "64", "--reasoning-budget", "-1"}), json::object());
  EXPECT_EQ(error_of({"--reasoning-budget", "-2"}),
            "--reasoning-budget must be -1 (unrestricted), 0 (no thinking) or a number of "
            "tokens, got -2");
  EXPECT_NE(error_of({"--reasoning-budget", "4294967296"}).find("--reasoning-budget"),
            std::string::npos);
  EXPECT_EQ(error_of({"--reasoning-format", "raw"}),
            "--reasoning-format: reasoning_format must be auto, deepseek, deepseek-legacy or none, "
            "got 'raw'");
  EXPECT_EQ(defaults_of({"--reasoning-format", "deepseek-legacy"}),
            json({{"reasoning_format", "deepseek-legacy"}}));
}

TEST(RequestDefaultOptions, BadValuesNameTheFlag) {
  EXPECT_EQ(error_of({"--temp", "3"}), "--temp: 'temperature' must be between 0 and 2, got 3");
  EXPECT_EQ(error_of({"-n", "0"}),
            "--n-predict: 'max_tokens' must be between 1 and 16777216, got 0");
  EXPECT_EQ(error_of({"--presence-penalty", "-3"}),
            "--presence-penalty: 'presence_penalty' must be between -2 and 2, got -3");
  EXPECT_NE(error_of({"--top-p", "x"}).find("--top-p"), std::string::npos);
  EXPECT_NE(error_of({"--samplers", "top_k;nope"}).find("no sampler named 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of({"--top-k", "40", "--min-p", "0.1", "--samplers", "min_p;top_k"})
                .find("--samplers: "),
            std::string::npos);
  EXPECT_EQ(request_default_flag("dynatemp_exponent"), "--dynatemp-exp");
  EXPECT_EQ(request_default_flag("stop"), "stop");
}

}  // namespace
}  // namespace specdec::cli
