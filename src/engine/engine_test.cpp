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

// GenerationOptions::draft_context: a draft with a long prompt to read reads only its last
// tokens. With the target as its own draft every draft passes when it reads everything; a
// window shows as rejections (its q conditions on the suffix alone). The greedy text stays the
// target's, and the follow-up turn after a windowed one, reading everything again, passes
// every draft: its draft did not take the windowed cache (no prefix of the history) for one.
TEST_F(EngineTest, AWindowedDraftKeepsTheGreedyTextAndIsNotReusedAsAPrefix) {
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("self.gguf")));
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*model_, &same, eo);
  Engine plain_engine(*model_, nullptr, eo);
  std::vector<int32_t> turn;
  for (int i = 0; i < 40; ++i) turn.push_back(65 + (i * 7) % 26);
  for (int32_t context : {1, 0, 1, 1, 0}) {
    GenerationOptions go;
    go.max_tokens = 16;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.draft_max = 4;
    go.draft_context = context;
    const GenerationResult spec = engine.generate(turn, go, {});
    const GenerationResult plain = plain_engine.generate(turn, go, {});
    ASSERT_EQ(spec.tokens, plain.tokens) << "context " << context << " at " << turn.size();
    ASSERT_GT(spec.stats.spec.drafted, 0);
    if (context == 0) {
      EXPECT_EQ(spec.stats.spec.accepted, spec.stats.spec.drafted) << turn.size();
    } else {
      EXPECT_LT(spec.stats.spec.accepted, spec.stats.spec.drafted) << turn.size();
    }
    turn.insert(turn.end(), spec.tokens.begin(), spec.tokens.end());
    for (int i = 0; i < 20; ++i) turn.push_back(70 + i % 5);  // the next user message
  }
}

// Logprobs come from the verify pass's rows when speculating and from single steps otherwise;
// batch-invariant kernels make them the same numbers, bit for bit, and the top list's first
// entry is the greedy token itself.
TEST_F(EngineTest, LogprobsAreTheSameWithAndWithoutSpeculation) {
  testing::TinyModelSpec other_spec;
  other_spec.seed = 7;  // another random model over the same vocabulary: drafts get rejected
  LoadedModel other =
      LoadedModel::load(testing::write_tiny_model(other_spec, testing::temp_path("d.gguf")));
  // The target as its own draft: every draft accepted, so the rows of accepted drafts and of
  // bonus tokens are checked too, not only corrections.
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("same.gguf")));
  for (LoadedModel* draft : {&other, &same}) {
    EngineOptions eo;
    eo.n_ctx = 128;
    Engine engine(*model_, draft, eo);
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.logprobs = 3;
    go.draft_max = 4;
    const std::vector<int32_t> prompt(10, 65);
    std::vector<TokenLogprob> streamed;
    const GenerationResult spec =
        engine.generate(prompt, go, {}, [&](std::span<const TokenLogprob> e) {
          streamed.insert(streamed.end(), e.begin(), e.end());
        });
    go.speculative = false;
    const GenerationResult plain = engine.generate(prompt, go, {});
    ASSERT_GT(spec.stats.spec.rounds, 0);
    if (draft == &other) {
      ASSERT_LT(spec.stats.spec.accepted, spec.stats.spec.drafted);  // rejections happened
    } else {
      ASSERT_EQ(spec.stats.spec.accepted, spec.stats.spec.drafted);
      ASSERT_GT(spec.stats.spec.accepted, 0);
    }
    ASSERT_EQ(spec.tokens, plain.tokens);
    ASSERT_EQ(spec.logprobs.size(), spec.tokens.size());
    ASSERT_EQ(plain.logprobs.size(), plain.tokens.size());
    ASSERT_EQ(streamed.size(), spec.logprobs.size());  // the callback saw every entry once
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
      EXPECT_EQ(spec.logprobs[i].token, spec.tokens[i]);
      EXPECT_EQ(spec.logprobs[i].logprob, plain.logprobs[i].logprob) << i;
      EXPECT_EQ(streamed[i].logprob, spec.logprobs[i].logprob) << i;
      ASSERT_EQ(spec.logprobs[i].top.size(), 3u);
      EXPECT_EQ(spec.logprobs[i].top, plain.logprobs[i].top) << i;
      EXPECT_EQ(spec.logprobs[i].top[0].first, spec.tokens[i]);  // greedy: the most likely
      EXPECT_LE(spec.logprobs[i].logprob, 0.0f);
    }
    go.logprobs = -1;
    EXPECT_TRUE(engine.generate(prompt, go, {}).logprobs.empty());
  }
}

}  // namespace
}  // namespace specdec
