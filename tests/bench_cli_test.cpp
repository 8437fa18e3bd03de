// `specdec bench` end to end on tiny random-weight models: the table, the raw JSON and the
// one-line errors for bad flags. Settings are tiny; the numbers themselves mean nothing here.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli_runner.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

using testing::CliResult;
using testing::run_cli;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    target_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("target.gguf")));
    spec.seed = 2;
    spec.n_layer = 1;
    draft_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("draft.gguf")));
    prompts_ = new std::string(testing::temp_path("prompts"));
    write_file(std::filesystem::path(*prompts_) / "facts" / "a.txt", "the cat sat on the mat\n");
    write_file(std::filesystem::path(*prompts_) / "facts" / "b.txt", "abc abc abc\n");
    write_file(std::filesystem::path(*prompts_) / "code" / "x.txt", "def f(x): return x\n");
    write_file(std::filesystem::path(*prompts_) / "code" / "notes.md", "not a prompt");
  }
  // The tiny settings every run shares; tests append to them.
  static std::vector<std::string> base_args() {
    return {"bench",   "-m",           *target_,     "--prompts",
            *prompts_, "--categories", "facts,code", "--gammas",
            "1,3",     "--temps",      "0",          "--repeats",
            "1",       "-n",           "8",          "-t",
            "2",       "-c",           "128",        "--cache-check-tokens",
            "4"};
  }
  static std::string* target_;
  static std::string* draft_;
  static std::string* prompts_;
};
std::string* BenchCli::target_ = nullptr;
std::string* BenchCli::draft_ = nullptr;
std::string* BenchCli::prompts_ = nullptr;

TEST_F(BenchCli, DraftModelTableAndRawJson) {
  const std::string json_path = testing::temp_path("bench.json");
  std::vector<std::string> args = base_args();
  // Fixed-length model drafts only: the random-weight draft is never confident enough for the
  // default adaptive rule to draft, and the default hybrid lookup could take every round of
  // these repetitive tiny texts; either way the draft model would cost nothing.
  args.insert(args.end(), {"-md", *draft_, "--draft-policy", "fixed", "--no-draft-hybrid", "--json",
                           json_path});
  CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
  for (const char* s :
       {"category facts, T 0", "category code, T 0", "base      2", "speedup", "theory",
        "acc/round", "verify/step", "KV cache ablation", "same tokens: yes"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }

  const nlohmann::json j = nlohmann::json::parse(testing::read_file(json_path));
  EXPECT_EQ(j["meta"]["drafter"], "model");
  EXPECT_EQ(j["meta"]["prompts"].size(), 3u);  // notes.md is not a prompt
  // 3 prompts x 1 temperature x 1 repeat x (baseline + 2 gammas).
  ASSERT_EQ(j["runs"].size(), 9u);
  std::map<int, int> per_gamma;
  for (const auto& run : j["runs"]) {
    per_gamma[run["gamma"].get<int>()]++;
    EXPECT_EQ(run["generated_tokens"], 8);
    EXPECT_GT(run["decode_ms"].get<double>(), 0.0);
    for (const char* k : {"category", "prompt", "temperature", "repeat", "order", "prefill_ms",
                          "decode_tokens_per_s", "ms_per_token"}) {
      EXPECT_TRUE(run.contains(k)) << k;
    }
    if (run["gamma"] == 0) {
      EXPECT_FALSE(run["speculative"].get<bool>());
      continue;
    }
    const auto& s = run["speculative_stats"];
    EXPECT_EQ(s["gamma"], run["gamma"]);
    int64_t rounds = 0, accepted = 0;
    for (size_t a = 0; a < s["accepted_histogram"].size(); ++a) {
      rounds += s["accepted_histogram"][a].get<int64_t>();
      accepted += static_cast<int64_t>(a) * s["accepted_histogram"][a].get<int64_t>();
    }
    EXPECT_EQ(rounds, s["rounds"].get<int64_t>());
    EXPECT_EQ(accepted, s["accepted"].get<int64_t>());
    ASSERT_FALSE(s["per_round"].empty());
    EXPECT_TRUE(s["per_round"][0].contains("target_entropy"));
  }
  EXPECT_EQ(per_gamma, (std::map<int, int>{{0, 3}, {1, 3}, {3, 3}}));

  // Two categories x (baseline + 2 gammas), the baseline row at speedup 1.
  ASSERT_EQ(j["summary"].size(), 6u);
  EXPECT_EQ(j["summary"][0]["gamma"], 0);
  EXPECT_EQ(j["summary"][0]["speedup"], 1.0);
  for (const auto& row : j["summary"]) {
    EXPECT_GT(row["tokens_per_s_median"].get<double>(), 0.0);
    if (row["gamma"] == 0) continue;
    EXPECT_GT(row["theoretical_speedup"].get<double>(), 0.0);
    EXPECT_GT(row["cost_ratio_c"].get<double>(), 0.0);  // a draft model costs something
    EXPECT_LE(row["acceptance_min"].get<double>(), row["acceptance_mean"].get<double>());
    EXPECT_LE(row["acceptance_mean"].get<double>(), row["acceptance_max"].get<double>());
  }
  EXPECT_TRUE(j["cache_check"]["same_tokens"].get<bool>());
  EXPECT_EQ(j["cache_check"]["tokens"], 4);
}

TEST_F(BenchCli, NgramDrafterSeveralTemperaturesAndRepeats) {
  const std::string json_path = testing::temp_path("bench_ngram.json");
  std::vector<std::string> args = base_args();
  args.insert(args.end(),
              {"--draft-ngram", "--no-cache-check", "--json", json_path, "--categories", "facts",
               "--temps", "0,0.5", "--repeats", "2", "--ngram-policy", "fixed"});
  CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("category facts, T 0.5"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("KV cache ablation"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(json_path));
  EXPECT_EQ(j["meta"]["drafter"], "ngram");
  EXPECT_EQ(j["meta"]["ngram"]["policy"], "fixed");
  EXPECT_NE(r.out.find("n-gram prompt lookup (n 1..3, fixed)"), std::string::npos) << r.out;
  EXPECT_EQ(j["runs"].size(), 2u * 2u * 2u * 3u);  // prompts x temps x repeats x configs
  EXPECT_FALSE(j.contains("cache_check"));
  // Timings of a model this small say nothing about cost ratios; only check they are there.
  for (const auto& row : j["summary"]) EXPECT_GE(row["cost_ratio_c"].get<double>(), 0.0);
}

TEST_F(BenchCli, BadFlagsGiveOneLineErrors) {
  auto expect_error = [](std::vector<std::string> extra, const std::string& fragment) {
    std::vector<std::string> args = base_args();
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << fragment << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  expect_error({}, "needs a drafter");
  expect_error({"-md", *draft_, "--draft-ngram"}, "mutually exclusive");
  expect_error({"-md", *draft_, "--gammas", "1,x"}, "--gammas");
  expect_error({"-md", *draft_, "--gammas", "0"}, "--gammas");
  expect_error({"-md", *draft_, "--gammas", "2,2"}, "twice");
  expect_error({"-md", *draft_, "--gammas", "1,,2"}, "empty item");
  expect_error({"-md", *draft_, "--temps", "-1"}, "--temps");
  expect_error({"-md", *draft_, "--repeats", "0"}, "--repeats");
  expect_error({"-md", *draft_, "--categories", "facts,nope"}, "nope");
  expect_error({"-md", *draft_, "-n", "200"}, "needs -c");
  expect_error({"-md", *draft_, "--bogus"}, "--bogus");
  expect_error({"-md", *draft_, "--no-draft-hybrid", "--ngram-policy", "fixed"},
               "they need --draft-ngram, --draft-hybrid");
  expect_error({"--draft-ngram", "--draft-hybrid"}, "--draft-hybrid needs a draft model");
  expect_error({"--draft-ngram", "--ngram-adapt-rate", "2"}, "--ngram-adapt-rate");
  expect_error({"-md", "/nonexistent/draft.gguf"}, "draft.gguf");
}

TEST_F(BenchCli, HelpListsTheFlags) {
  const CliResult r = run_cli({"bench", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* f : {"--gammas", "--temps", "--top-p", "--prompts", "--categories", "--repeats",
                        "--json", "--no-cache-check", "--draft-ngram"}) {
    EXPECT_NE(r.out.find(f), std::string::npos) << f;
  }
  EXPECT_NE(run_cli({"--help"}).out.find("bench"), std::string::npos);
}

}  // namespace
}  // namespace specdec
