// SmolLM2-135M (real weights) against llama.cpp: logits at several positions, tokenization of
// the prompts, and 64-token greedy generations, from fixtures that
// scripts/oracle/gen_logit_fixtures.py recorded with llama-cpp-python.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/engine.h"
#include "support/real_models.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";

nlohmann::json load_fixture() {
  std::ifstream in(testing::fixture_path("oracle_smollm2.json"));
  EXPECT_TRUE(in.good()) << "missing fixture oracle_smollm2.json";
  return nlohmann::json::parse(in);
}

class RealModelOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::require_real_model(kSmolLM2);
    if (!path) GTEST_SKIP() << testing::missing_model_message(kSmolLM2);
    model_ = std::make_unique<LoadedModel>(LoadedModel::load(*path));
    fixture_ = load_fixture();
  }
  std::unique_ptr<LoadedModel> model_;
  nlohmann::json fixture_;
};

TEST_F(RealModelOracle, TokenizesPromptsLikeLlamaCpp) {
  for (const auto& case_ : fixture_["logits"]) {
    auto ids = model_->tokenizer->encode(case_["text"].get<std::string>(), true, true);
    EXPECT_EQ(ids, case_["tokens"].get<std::vector<int32_t>>()) << case_["text"];
  }
  for (const auto& gen : fixture_["generate"]) {
    auto ids = model_->tokenizer->encode(gen["prompt"].get<std::string>(), true, true);
    EXPECT_EQ(ids, gen["prompt_tokens"].get<std::vector<int32_t>>()) << gen["prompt"];
  }
}

// Our kernels quantize activations the way llama.cpp does (Q8_0/Q8_1), but reduction orders
// differ (llama.cpp splits work differently), so logits agree closely, not bitwise.
TEST_F(RealModelOracle, LogitsMatchLlamaCppAtSeveralPositions) {
  ThreadPool pool(2);
  const int32_t n_vocab = model_->model->config().n_vocab;
  double worst_abs = 0;
  for (const auto& case_ : fixture_["logits"]) {
    auto tokens = case_["tokens"].get<std::vector<int32_t>>();
    const auto k = static_cast<int32_t>(tokens.size());
    KvCache cache(model_->model->config(), 512);
    std::vector<int32_t> positions(k), rows(k);
    std::iota(positions.begin(), positions.end(), 0);
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> logits(static_cast<size_t>(k) * n_vocab);
    model_->model->forward(tokens, positions, cache, rows, logits.data(), pool);
    for (const auto& at : case_["positions"]) {
      const int pos = at["pos"];
      const float* row = logits.data() + static_cast<size_t>(pos) * n_vocab;
      const int32_t argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
      EXPECT_EQ(argmax, at["argmax"].get<int32_t>()) << case_["text"] << " pos " << pos;
      double l2 = 0;
      for (int32_t i = 0; i < n_vocab; ++i) l2 += static_cast<double>(row[i]) * row[i];
      EXPECT_NEAR(std::sqrt(l2), at["l2"].get<double>(), 0.01 * at["l2"].get<double>());
      for (const auto& top : at["top"]) {
        const int32_t id = top[0];
        const double diff = std::abs(row[id] - top[1].get<double>());
        worst_abs = std::max(worst_abs, diff);
        EXPECT_LT(diff, 0.35) << case_["text"] << " pos " << pos << " id " << id;
      }
    }
  }
  RecordProperty("worst_abs_diff_top20", std::to_string(worst_abs));
  std::cout << "worst |ours - llama.cpp| over top-20 logits: " << worst_abs << "\n";
}

TEST_F(RealModelOracle, GreedyGenerationMatchesLlamaCpp) {
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.n_threads = 2;
  Engine engine(*model_, nullptr, eo);
  for (const auto& gen : fixture_["generate"]) {
    auto prompt = gen["prompt_tokens"].get<std::vector<int32_t>>();
    GenerationOptions go;
    go.max_tokens = gen["n_predict"];
    go.sampling.temperature = 0;
    GenerationResult r = engine.generate(prompt, go, {});
    auto expected = gen["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(r.tokens, expected) << gen["kind"];
    EXPECT_EQ(r.text, gen["text"].get<std::string>()) << gen["kind"];
  }
}

}  // namespace
}  // namespace specdec
