// Prompt-lookup (n-gram) speculation on real weights: greedy output equals target-only greedy
// token for token, sampled runs repeat with their seed, an engine that also holds a draft model
// can switch between the two drafters from request to request, and the CLI's --draft-ngram.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/engine.h"
#include "engine/layer_draft.h"
#include "support/cli_runner.h"
#include "support/real_models.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

using testing::CliResult;
using testing::run_cli;

constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";

// Text that the model tends to repeat (lists, a passage to restate), so drafts are made and both
// accepted and rejected along the way.
const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "<|im_start|>user\nThe Nile is the longest river in Africa. The Nile flows north through "
      "eleven countries. Repeat the two sentences above exactly.<|im_end|>\n"
      "<|im_start|>assistant\n",
      "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
      "Monday, Tuesday, Wednesday, Thursday, Friday. Monday, Tuesday,",
      "The capital of France is",
  };
  return p;
}

class RealModelNgram : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = testing::require_real_model(kSmolLM2);
    if (!path) return;
    path_ = new std::string(*path);
    target_ = new LoadedModel(LoadedModel::load(*path));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete path_;
  }
  void SetUp() override {
    if (target_ == nullptr) GTEST_SKIP() << testing::missing_model_message(kSmolLM2);
  }
  static EngineOptions engine_options() {
    EngineOptions eo;
    eo.n_ctx = 256;
    eo.n_threads = 2;
    return eo;
  }
  static LoadedModel* target_;
  static std::string* path_;
};
LoadedModel* RealModelNgram::target_ = nullptr;
std::string* RealModelNgram::path_ = nullptr;

TEST_F(RealModelNgram, GreedyOutputEqualsTargetOnlyForManyPromptsAndGammas) {
  Engine engine(*target_, nullptr, engine_options());
  int64_t drafted = 0, accepted = 0, rejected_rounds = 0;
  for (const std::string& text : prompts()) {
    const std::vector<int32_t> prompt = engine.tokenize_prompt(text);
    GenerationOptions go;
    go.max_tokens = 32;
    go.sampling.temperature = 0;
    const GenerationResult expected = engine.generate(prompt, go, {});
    EXPECT_FALSE(expected.stats.speculative);
    go.drafter = DrafterKind::Ngram;
    // Both policies; the adaptive one also with a cheap verify (long drafts, often rejected).
    for (const NgramParams np :
         {NgramParams{3, 1, NgramPolicy::Fixed}, NgramParams{2, 2, NgramPolicy::Fixed},
          NgramParams{}, NgramParams{3, 1, NgramPolicy::Adaptive, 0.05f, 0.5f}}) {
      go.ngram = np;
      for (int32_t gamma : {1, 2, 4, 8}) {
        go.draft_max = gamma;
        const GenerationResult got = engine.generate(prompt, go, {});
        EXPECT_EQ(got.tokens, expected.tokens) << text << " gamma " << gamma;
        EXPECT_EQ(got.text, expected.text) << text << " gamma " << gamma;
        EXPECT_TRUE(got.stats.speculative);
        EXPECT_STREQ(got.stats.drafter, "ngram");
        drafted += got.stats.spec.drafted;
        accepted += got.stats.spec.accepted;
        for (const RoundLog& l : got.stats.spec.log) rejected_rounds += l.gamma > l.accepted;
      }
    }
  }
  // Meaningful only if drafts were made and both accepted and rejected.
  EXPECT_GT(accepted, drafted / 10);
  EXPECT_GT(rejected_rounds, 10);
}

TEST_F(RealModelNgram, SampledRunsAreReproducibleAndStatsConsistent) {
  Engine engine(*target_, nullptr, engine_options());
  const std::vector<int32_t> prompt = engine.tokenize_prompt(prompts()[0]);
  GenerationOptions go;
  go.max_tokens = 40;
  go.ignore_eos = true;
  go.sampling = {0.7f, 0, 0.9f, 0.0f, 1234};
  go.drafter = DrafterKind::Ngram;
  go.draft_max = 4;
  const GenerationResult a = engine.generate(prompt, go, {});
  const GenerationResult b = engine.generate(prompt, go, {});
  EXPECT_EQ(a.tokens, b.tokens);
  const DecodeStats& s = a.stats.spec;
  int64_t hist_rounds = 0, hist_accepted = 0, logged_drafted = 0;
  for (size_t k = 0; k < s.accepted_hist.size(); ++k) {
    hist_rounds += s.accepted_hist[k];
    hist_accepted += static_cast<int64_t>(k) * s.accepted_hist[k];
  }
  for (const RoundLog& l : s.log) logged_drafted += l.gamma;
  EXPECT_EQ(hist_rounds, s.rounds);
  EXPECT_EQ(hist_accepted, s.accepted);
  EXPECT_EQ(logged_drafted, s.drafted);
  EXPECT_EQ(static_cast<int64_t>(s.log.size()), s.rounds + s.baseline_steps);
  EXPECT_EQ(s.emitted, 40);
  EXPECT_EQ(a.stats.generated_tokens, 40);
  EXPECT_GT(s.rounds, 0);
}

TEST_F(RealModelNgram, OneEngineSwitchesBetweenDraftersPerRequest) {
  // With a draft model loaded, requests may still choose prompt lookup; the draft model's cache is
  // then left a valid prefix, so a later model-drafted request reuses it correctly.
  const std::string draft_path = testing::temp_path("smollm2_first10_ngram.gguf");
  write_layer_draft(*target_->file, 10, draft_path);
  LoadedModel draft = LoadedModel::load(draft_path);
  Engine plain(*target_, nullptr, engine_options());
  Engine engine(*target_, &draft, engine_options());
  GenerationOptions go;
  go.max_tokens = 24;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  for (const std::string& text : prompts()) {
    const std::vector<int32_t> prompt = engine.tokenize_prompt(text);
    const GenerationResult expected = plain.generate(prompt, go, {});
    for (const DrafterKind kind : {DrafterKind::Model, DrafterKind::Ngram, DrafterKind::Model}) {
      go.drafter = kind;
      const GenerationResult got = engine.generate(prompt, go, {});
      EXPECT_EQ(got.tokens, expected.tokens) << text << " " << drafter_kind_name(kind);
      EXPECT_STREQ(got.stats.drafter, drafter_kind_name(kind));
    }
  }
}

TEST_F(RealModelNgram, CliDraftNgramMatchesPlainGreedyAndRejectsMd) {
  const std::vector<std::string> base{"run",    "-m", *path_, "-p", prompts()[2], "-n", "24",
                                      "--temp", "0",  "-t",   "2",  "-c",         "256"};
  const CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::vector<std::string> spec = base;
  const std::string json_path = testing::temp_path("ngram_stats.json");
  for (const char* a : {"--draft-ngram", "--ngram-max", "4", "--ngram-min", "2", "--draft-max", "4",
                        "--stats-json"}) {
    spec.emplace_back(a);
  }
  spec.push_back(json_path);
  const CliResult got = run_cli(spec);
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(got.out, plain.out);
  EXPECT_NE(got.err.find("speculative: gamma 4"), std::string::npos) << got.err;
  EXPECT_NE(got.err.find("drafter ngram (n 2..4)"), std::string::npos) << got.err;
  const std::string json = testing::read_file(json_path);
  EXPECT_NE(json.find("\"drafter\": \"ngram\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"n_max\": 4"), std::string::npos) << json;

  // Clean one-line errors, before any model is loaded.
  const auto expect_error = [](const CliResult& r, const std::string& fragment) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  };
  expect_error(run_cli({"run", "-m", *path_, "-md", *path_, "--draft-ngram", "-p", "x"}),
               "mutually exclusive");
  expect_error(run_cli({"run", "-m", *path_, "--ngram-max", "2", "-p", "x"}), "need --draft-ngram");
  expect_error(run_cli({"run", "-m", *path_, "--draft-ngram", "--ngram-max", "2", "--ngram-min",
                        "3", "-p", "x"}),
               "must not exceed");
  expect_error(run_cli({"run", "-m", *path_, "--ngram-policy", "fixed", "-p", "x"}),
               "need --draft-ngram");
  expect_error(
      run_cli({"run", "-m", *path_, "--draft-ngram", "--ngram-policy", "longest", "-p", "x"}),
      "must be adaptive or fixed");
  expect_error(
      run_cli({"run", "-m", *path_, "--draft-ngram", "--ngram-verify-cost", "-1", "-p", "x"}),
      "--ngram-verify-cost must be in [0, 10]");

  // The policy flags reach the drafter and the report; output stays the target's.
  for (const char* policy : {"fixed", "adaptive"}) {
    std::vector<std::string> with_policy = spec;
    for (const char* a : {"--ngram-policy", policy, "--ngram-verify-cost", "0.1"}) {
      with_policy.emplace_back(a);
    }
    const CliResult r = run_cli(with_policy);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out) << policy;
    EXPECT_NE(r.err.find(std::string("(n 2..4) ") + policy), std::string::npos) << r.err;
    const std::string j = testing::read_file(json_path);
    EXPECT_NE(j.find(std::string("\"policy\": \"") + policy + "\""), std::string::npos) << j;
  }
}

}  // namespace
}  // namespace specdec
