#include "engine/engine.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    model_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("m.gguf"))));
  }
  GenerationResult run(int32_t n_ctx, int32_t max_tokens, std::vector<std::string> stop = {}) {
    EngineOptions eo;
    eo.n_ctx = n_ctx;
    Engine engine(*model_, nullptr, eo);
    GenerationOptions go;
    go.max_tokens = max_tokens;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.stop = std::move(stop);
    return engine.generate(std::vector<int32_t>(10, 65), go, {});
  }
  std::unique_ptr<LoadedModel> model_;
};

TEST_F(EngineTest, FinishReasonsTellLengthFromAFullContext) {
  // 16 slots, 10 prompt tokens: the last prompt token and 6 more fit, so 7 can be generated.
  GenerationResult full = run(16, 100);
  EXPECT_EQ(full.finish, FinishReason::ContextFull);
  EXPECT_EQ(full.tokens.size(), 7u);
  GenerationResult until_full = run(16, -1);
  EXPECT_EQ(until_full.finish, FinishReason::ContextFull);
  EXPECT_EQ(until_full.tokens, full.tokens);
  GenerationResult length = run(16, 3);
  EXPECT_EQ(length.finish, FinishReason::Length);
  EXPECT_EQ(length.tokens.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 3), length.tokens);
}

TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  GenerationResult all = run(64, 20);
  ASSERT_GE(all.text.size(), 4u);
  const std::string stop = all.text.substr(2, 2);
  GenerationResult cut = run(64, 20, {stop});
  EXPECT_EQ(cut.finish, FinishReason::Stop);
  EXPECT_EQ(cut.text, all.text.substr(0, all.text.find(stop)));
}

TEST_F(EngineTest, PromptThatFillsTheContextIsRefused) { EXPECT_THROW(run(10, 5), Error); }

}  // namespace
}  // namespace specdec
