// Memory reports of `specdec info` and `specdec run` (stderr summary and --stats-json): both
// models' mapped, packed, released and KV-cache bytes and the process's resident set; and the
// release of packed matrices' mapped pages changes no output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

using testing::CliResult;
using testing::run_cli;
using testing::run_cli_env;

class CliMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    spec.n_ctx = 128;
    spec.n_embd = 256;  // Q8_0 matrices of several pages each, so whole pages can be released
    spec.n_ff = 512;
    spec.weight_type = GgmlType::Q8_0;
    target_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("mt.gguf")));
    spec.seed = 2;
    spec.n_layer = 1;
    draft_ = new std::string(testing::write_tiny_model(spec, testing::temp_path("md.gguf")));
  }
  static std::string* target_;
  static std::string* draft_;
};
std::string* CliMemory::target_ = nullptr;
std::string* CliMemory::draft_ = nullptr;

TEST_F(CliMemory, InfoReportsBothModelsAndTheProcess) {
  const CliResult r = run_cli({"info", "-m", *target_, "-md", *draft_, "-c", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s :
       {"memory:        weights ", "draft memory:  weights ", "of the mapping released",
        "KV cache ", "(64 tokens, f32)", "process:       resident ", "peak "}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST_F(CliMemory, RunReportsMemoryAndReleasingChangesNothing) {
  const std::string json_path = testing::temp_path("mem_stats.json");
  const std::vector<std::string> args = {
      "run", "-m", *target_, "-md", *draft_, "-p", "hi",           "-n",           "16",
      "-t",  "1",  "--temp", "0.8", "-s",    "4",  "--ignore-eos", "--stats-json", json_path};
  const CliResult released = run_cli(args);
  ASSERT_EQ(released.exit_code, 0) << released.err;
  EXPECT_NE(released.err.find("memory:    target weights "), std::string::npos) << released.err;
  EXPECT_NE(released.err.find("           draft  weights "), std::string::npos) << released.err;
  EXPECT_NE(released.err.find("process:   resident "), std::string::npos) << released.err;
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(json_path));
  for (const char* model : {"target", "draft"}) {
    const nlohmann::json& m = j["memory"][model];
    EXPECT_GT(m["packed_bytes"].get<size_t>(), 0u) << model;
    EXPECT_GT(m["released_bytes"].get<size_t>(), 0u) << model;
    // Only the file's weight pages are released. The target's copies are its file's matrices
    // repacked, byte for byte as large; the draft's are requantized narrower (--draft-type auto),
    // so its released pages can outweigh its copies.
    EXPECT_LE(m["released_bytes"].get<size_t>(), m["weight_bytes"].get<size_t>()) << model;
    EXPECT_GT(m["kv_cache_bytes"].get<size_t>(), 0u) << model;
    EXPECT_EQ(m["kv_cache_tokens"], 4096) << model;
  }
  EXPECT_LE(j["memory"]["target"]["released_bytes"].get<size_t>(),
            j["memory"]["target"]["packed_bytes"].get<size_t>());
  EXPECT_GT(j["memory"]["process"]["rss_bytes"].get<size_t>(), 0u);
  EXPECT_GE(j["memory"]["process"]["peak_rss_bytes"].get<size_t>(),
            j["memory"]["process"]["rss_bytes"].get<size_t>());

  // Keeping every mapped page gives the same text, and reports nothing released.
  const CliResult kept = run_cli_env({"SPECDEC_NO_RELEASE=1"}, args);
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(kept.out, released.out);
  const nlohmann::json k = nlohmann::json::parse(testing::read_file(json_path));
  EXPECT_EQ(k["memory"]["draft"]["released_bytes"], 0);
  EXPECT_EQ(k["token_ids"], j["token_ids"]);

  // --no-mmap reads both files whole: the same text, with the same pages freed from the read
  // copies as were released from the mappings (those freed pages are made inaccessible, so the
  // same text also shows that nothing reads them again).
  std::vector<std::string> read = args;
  read.push_back("--no-mmap");
  const CliResult whole = run_cli(read);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.out, released.out);
  const nlohmann::json w = nlohmann::json::parse(testing::read_file(json_path));
  EXPECT_EQ(w["token_ids"], j["token_ids"]);
  for (const char* model : {"target", "draft"}) {
    EXPECT_EQ(w["memory"][model]["released_bytes"], j["memory"][model]["released_bytes"]) << model;
    EXPECT_EQ(w["memory"][model]["file_access"], "read") << model;
    EXPECT_EQ(w["memory"][model]["packed_bytes"], j["memory"][model]["packed_bytes"]) << model;
  }
}

}  // namespace
}  // namespace specdec
