#include "engine/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/model_lm.h"
#include "support/tiny_model.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

double norm_p(const std::vector<float>& v, double p) {
  double s = 0;
  for (float x : v) s += std::pow(std::fabs(static_cast<double>(x)), p);
  return std::pow(s, 1.0 / p);
}

TEST(EmbeddingNormalize, EachNormIsOneAfterwardsAndZeroStaysZero) {
  const std::vector<float> v0 = {3.0f, -4.0f, 1.0f, 0.5f};
  std::vector<float> v = v0;
  normalize_embedding(v, 2);
  EXPECT_NEAR(norm_p(v, 2), 1.0, 1e-6);
  EXPECT_NEAR(v[0] / v[1], v0[0] / v0[1], 1e-6);  // the direction is kept
  v = v0;
  normalize_embedding(v, 1);
  EXPECT_NEAR(norm_p(v, 1), 1.0, 1e-6);
  v = v0;
  normalize_embedding(v, 3);
  EXPECT_NEAR(norm_p(v, 3), 1.0, 1e-6);
  v = v0;
  normalize_embedding(v, 0);  // int16 range: the largest |x| becomes 32760
  EXPECT_NEAR(v[1], -32760.0f, 1e-2);
  EXPECT_NEAR(v[0], 3.0f / 4.0f * 32760.0f, 1e-2);
  v = v0;
  normalize_embedding(v, -1);
  EXPECT_EQ(v, v0);
  std::vector<float> zero(4, 0.0f);
  normalize_embedding(zero, 2);
  EXPECT_EQ(zero, std::vector<float>(4, 0.0f));
  EXPECT_THROW(normalize_embedding(v, -2), Error);
  std::vector<float> bad = {1.0f, INFINITY};
  EXPECT_THROW(normalize_embedding(bad, 2), Error);
}

TEST(EmbeddingPooling, RowsArePooledAsNamed) {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 9};  // 3 rows of 2
  EmbeddingParams p;
  p.normalize = -1;
  p.pooling = Pooling::Mean;
  EXPECT_EQ(pool_rows(rows, 2, p), (std::vector<std::vector<float>>{{3, 5}}));
  p.pooling = Pooling::Cls;
  EXPECT_EQ(pool_rows(rows, 2, p), (std::vector<std::vector<float>>{{1, 2}}));
  p.pooling = Pooling::Last;
  EXPECT_EQ(pool_rows(rows, 2, p), (std::vector<std::vector<float>>{{5, 9}}));
  p.pooling = Pooling::None;
  p.normalize = 2;  // per-token vectors are returned as they are, as llama-server does
  EXPECT_EQ(pool_rows(rows, 2, p), (std::vector<std::vector<float>>{{1, 2}, {3, 4}, {5, 9}}));
  p.pooling = Pooling::Last;
  const auto unit = pool_rows(rows, 2, p);
  EXPECT_NEAR(unit[0][0], 5 / std::sqrt(106.0), 1e-6);
  EXPECT_THROW(pool_rows(rows, 4, p), Error);
  EXPECT_THROW(pool_rows({}, 2, p), Error);

  for (const char* name : {"none", "mean", "cls", "last"}) {
    ASSERT_TRUE(parse_pooling(name).has_value()) << name;
    EXPECT_STREQ(pooling_name(*parse_pooling(name)), name);
  }
  EXPECT_FALSE(parse_pooling("rank").has_value());
  EXPECT_FALSE(parse_pooling("Mean").has_value());
}

TEST(EmbeddingPooling, TheFilesPoolingTypeIsTheDefault) {
  auto config_with = [](int pooling) {
    testing::TinyModelSpec spec;
    if (pooling >= 0) {
      spec.edit = [pooling](gguf::GgufWriter& w) {
        w.set_u32("llama.pooling_type", static_cast<uint32_t>(pooling));
      };
    }
    return LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("pool.gguf")))
        .model->config();
  };
  EXPECT_EQ(config_with(-1).pooling_type, -1);
  EXPECT_EQ(default_pooling(config_with(-1)), Pooling::Last);  // a chat model names none
  EXPECT_EQ(default_pooling(config_with(0)), Pooling::None);
  EXPECT_EQ(default_pooling(config_with(1)), Pooling::Mean);
  EXPECT_EQ(default_pooling(config_with(2)), Pooling::Cls);
  EXPECT_EQ(default_pooling(config_with(3)), Pooling::Last);
  EXPECT_THROW(default_pooling(config_with(4)), Error);  // rank: a reranker's head
  EXPECT_THROW(config_with(7), Error);
}

class EmbeddingModel : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec_, testing::temp_path("embed.gguf"))));
  }
  std::vector<std::vector<float>> embed(const std::vector<int32_t>& tokens, Pooling pooling,
                                        int32_t normalize = -1) {
    ModelLM lm(*model_->model, 64, pool_);
    return embed_tokens(lm, tokens, EmbeddingParams{pooling, normalize});
  }
  testing::TinyModelSpec spec_;
  std::unique_ptr<LoadedModel> model_;
  ThreadPool pool_{2};
  std::vector<int32_t> tokens_ = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
};

TEST_F(EmbeddingModel, ALastTokensStateIsWhatTheHeadTurnsIntoItsLogits) {
  // The hidden state is the final-normed residual: the output head times it gives the logits.
  const auto e = embed(tokens_, Pooling::Last);
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(e[0].size(), static_cast<size_t>(spec_.n_embd));
  ModelLM lm(*model_->model, 64, pool_);
  std::vector<float> logits;
  lm.forward_last(tokens_, &logits);
  const gguf::TensorInfo& head = model_->file->tensor("output.weight");
  ASSERT_EQ(head.type, GgmlType::F32);
  const auto* w = reinterpret_cast<const float*>(head.data);
  double worst = 0;
  for (int v = 0; v < spec_.n_vocab; ++v) {
    double dot = 0;
    for (int i = 0; i < spec_.n_embd; ++i)
      dot += static_cast<double>(w[v * spec_.n_embd + i]) * e[0][i];
    worst = std::max(worst, std::fabs(dot - logits[static_cast<size_t>(v)]));
  }
  EXPECT_LT(worst, 1e-4);
}

TEST_F(EmbeddingModel, PoolingsAreMadeOfTheSameTokenStates) {
  const auto rows = embed(tokens_, Pooling::None);
  ASSERT_EQ(rows.size(), tokens_.size());
  // Token i's state under causal attention is the last state of the input cut after it, to
  // the bit (batch invariance).
  for (size_t i : {size_t{0}, size_t{5}, tokens_.size() - 1}) {
    const std::vector<int32_t> cut(tokens_.begin(), tokens_.begin() + static_cast<long>(i) + 1);
    const auto last = embed(cut, Pooling::Last);
    EXPECT_EQ(std::memcmp(last[0].data(), rows[i].data(), rows[i].size() * sizeof(float)), 0) << i;
  }
  EXPECT_EQ(embed(tokens_, Pooling::Cls)[0], rows[0]);
  const auto mean = embed(tokens_, Pooling::Mean)[0];
  for (size_t d = 0; d < mean.size(); ++d) {
    double s = 0;
    for (const auto& r : rows) s += r[d];
    EXPECT_NEAR(mean[d], s / static_cast<double>(rows.size()), 1e-6) << d;
  }
  // Different inputs give different vectors, and the default normalization makes them unit.
  const auto a = embed(tokens_, Pooling::Last, 2)[0];
  std::vector<int32_t> other = tokens_;
  other[3] = 65;
  const auto b = embed(other, Pooling::Last, 2)[0];
  EXPECT_NEAR(norm_p(a, 2), 1.0, 1e-5);
  EXPECT_NE(a, b);
}

TEST_F(EmbeddingModel, OnlyLastPoolingReusesACachedPrefix) {
  ModelLM lm(*model_->model, 64, pool_);
  lm.forward_last(std::span<const int32_t>(tokens_).first(7), nullptr);
  const auto reused = embed_tokens(lm, tokens_, EmbeddingParams{Pooling::Last, -1});
  EXPECT_EQ(reused, embed(tokens_, Pooling::Last));
  EXPECT_EQ(lm.length(), static_cast<int32_t>(tokens_.size()));
  ModelLM mean_lm(*model_->model, 64, pool_);
  mean_lm.forward_last(std::span<const int32_t>(tokens_).first(3), nullptr);
  EXPECT_THROW(embed_tokens(mean_lm, tokens_, EmbeddingParams{Pooling::Mean, 2}), Error);
  EXPECT_THROW(embed_tokens(lm, tokens_, EmbeddingParams{Pooling::Last, 2}), Error);  // all cached
  EXPECT_THROW(embed_tokens(mean_lm, {}, EmbeddingParams{}), Error);
}

TEST_F(EmbeddingModel, TheEngineEmbedsInAnySlotAndBatchAndKeepsGenerationExact) {
  LoadedModel draft = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("edraft.gguf")));
  GenerationOptions embed_opts;
  embed_opts.embedding = EmbeddingParams{Pooling::Last, 2};
  GenerationOptions gen;
  gen.max_tokens = 12;
  gen.sampling.temperature = 0;
  gen.ignore_eos = true;
  gen.draft_max = 3;
  const std::vector<int32_t> prompt(tokens_.begin(), tokens_.begin() + 8);

  EngineOptions alone_opts;
  alone_opts.n_ctx = 64;
  Engine alone(*model_, &draft, alone_opts);
  const GenerationResult fresh_text = alone.generate(prompt, gen, {});
  const GenerationResult one = alone.generate(tokens_, embed_opts, {});
  ASSERT_EQ(one.embedding.size(), 1u);
  EXPECT_EQ(one.stats.prompt_tokens, static_cast<int32_t>(tokens_.size()));
  EXPECT_TRUE(one.tokens.empty());
  EXPECT_TRUE(one.text.empty());
  // The slot's cache held the generation's prompt: its first 8 tokens are the input's.
  EXPECT_EQ(one.stats.cached_tokens, 8);
  EXPECT_EQ(one.embedding, embed(tokens_, Pooling::Last, 2));
  // A generation after it on the same slot (its caches now hold the input) is unchanged.
  const GenerationResult after = alone.generate(prompt, gen, {});
  EXPECT_EQ(after.tokens, fresh_text.tokens);
  EXPECT_GT(after.stats.spec.drafted, 0);

  // Among other slots generating at the same time, the bits are the same.
  EngineOptions batched_opts = alone_opts;
  batched_opts.n_slots = 3;
  Engine batched(*model_, &draft, batched_opts);
  std::vector<GenerationResult> results(3);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = batched.generate(prompt, gen, {}, {}, 0); });
  threads.emplace_back([&] { results[1] = batched.generate(tokens_, embed_opts, {}, {}, 1); });
  GenerationOptions mean_opts;
  mean_opts.embedding = EmbeddingParams{Pooling::Mean, 2};
  threads.emplace_back([&] { results[2] = batched.generate(tokens_, mean_opts, {}, {}, 2); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].tokens, fresh_text.tokens);
  EXPECT_EQ(results[1].embedding, one.embedding);
  EXPECT_EQ(results[2].embedding, embed(tokens_, Pooling::Mean, 2));

  // A client that leaves stops a long input between its chunks (32 rows each here); what was
  // read stays cached, and the next request on the slot reuses it.
  std::vector<int32_t> long_input;
  for (int i = 0; i < 50; ++i) long_input.push_back(65 + (i * 7) % 26);
  int asked = 0;
  const GenerationResult stopped =
      batched.generate(long_input, embed_opts, [&](std::string_view t) {
        EXPECT_TRUE(t.empty());
        ++asked;
        return false;
      });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(stopped.finish, FinishReason::Cancelled);
  EXPECT_TRUE(stopped.embedding.empty());
  const GenerationResult resumed = batched.generate(long_input, embed_opts, {});
  EXPECT_EQ(resumed.stats.cached_tokens, 32);
  EXPECT_EQ(resumed.embedding, embed(long_input, Pooling::Last, 2));

  // An input may fill the context (nothing is generated after it), not more.
  std::vector<int32_t> full(64, 80);
  EXPECT_EQ(alone.generate(full, embed_opts, {}).embedding.size(), 1u);
  full.push_back(80);
  EXPECT_THROW(alone.generate(full, embed_opts, {}), Error);
  embed_opts.embedding->normalize = -3;
  EXPECT_THROW(alone.generate(tokens_, embed_opts, {}), Error);
}

}  // namespace
}  // namespace specdec
