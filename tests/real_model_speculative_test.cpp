// Greedy speculative decoding on real weights reproduces target-only greedy output token for
// token. The draft is SmolLM2's own first 10 blocks (engine/layer_draft.h): the only
// same-vocabulary draft we can get for it, and a poor one, which is what this test wants: many
// rejections, so many corrections and rollbacks.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/layer_draft.h"
#include "support/decode_stats_checks.h"
#include "support/real_models.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";

class RealModelSpeculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = testing::require_real_model(kSmolLM2);
    if (!path) return;
    target_ = new LoadedModel(LoadedModel::load(*path));
    const std::string draft_path = testing::temp_path("smollm2_first10.gguf");
    write_layer_draft(*target_->file, 10, draft_path);
    draft_ = new LoadedModel(LoadedModel::load(draft_path));
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete target_;
  }
  void SetUp() override {
    if (target_ == nullptr) GTEST_SKIP() << testing::missing_model_message(kSmolLM2);
  }
  static LoadedModel* target_;
  static LoadedModel* draft_;
};
LoadedModel* RealModelSpeculative::target_ = nullptr;
LoadedModel* RealModelSpeculative::draft_ = nullptr;

TEST_F(RealModelSpeculative, GreedyOutputEqualsTargetOnlyForManyPromptsAndGammas) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.n_threads = 2;
  Engine plain(*target_, nullptr, eo);
  Engine spec(*target_, draft_, eo);
  const std::vector<std::string> prompts = {
      "The capital of France is",
      "def fibonacci(n):\n",
      "<|im_start|>user\nList three fruits.<|im_end|>\n<|im_start|>assistant\n",
      "Water boils at",
      "Once upon a time, in a small village,",
  };
  int64_t rounds = 0, rejected_rounds = 0;
  for (const std::string& text : prompts) {
    const std::vector<int32_t> prompt = plain.tokenize_prompt(text);
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    const GenerationResult expected = plain.generate(prompt, go, {});
    for (int32_t gamma : {1, 2, 4, 8}) {
      go.draft_max = gamma;
      const GenerationResult got = spec.generate(prompt, go, {});
      EXPECT_EQ(got.tokens, expected.tokens) << text << " gamma " << gamma;
      EXPECT_EQ(got.text, expected.text) << text << " gamma " << gamma;
      rounds += got.stats.spec.rounds;
      rejected_rounds += got.stats.spec.rounds - got.stats.spec.accepted_hist.back();
    }
  }
  // The comparison only means something if drafts were actually rejected along the way.
  EXPECT_GT(rejected_rounds, rounds / 4);
}

TEST_F(RealModelSpeculative, SampledRunsAreReproducibleAndStatsConsistent) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.n_threads = 2;
  Engine spec(*target_, draft_, eo);
  const std::vector<int32_t> prompt = spec.tokenize_prompt("The three primary colors are");
  GenerationOptions go;
  go.max_tokens = 32;
  go.sampling = {0.7f, 0, 0.9f, 0.0f, 1234};
  go.draft_max = 4;
  const GenerationResult a = spec.generate(prompt, go, {});
  const GenerationResult b = spec.generate(prompt, go, {});
  EXPECT_EQ(a.tokens, b.tokens);
  const DecodeStats& s = a.stats.spec;
  testing::expect_histogram_adds_up(s);
  EXPECT_EQ(static_cast<int64_t>(s.log.size()), s.rounds + s.baseline_steps);
  EXPECT_EQ(a.stats.generated_tokens, 32);
}

}  // namespace
}  // namespace specdec
