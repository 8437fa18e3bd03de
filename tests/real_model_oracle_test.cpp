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

// How close is close enough. The fixture comes from llama.cpp's single-row kernels (one token
// per decode, no weight repacking, f32 KV cache), which compute what our kernels compute: on the
// 2-layer models in tests/tiny_oracle_test.cpp we agree with them to 5e-5 for every weight type.
// Over SmolLM2's 30 layers, last-bit differences elsewhere (reduction order in attention, exp in
// softmax and SiLU) occasionally flip the Q8 rounding of an activation, and the flips compound:
// llama.cpp itself moves by up to 0.70 between its batched and one-token evaluation of the same
// prompt, and by up to 1.38 between its f32 and f16 KV caches
// (scripts/oracle/llama_cpp_self_variation.py). We allow 1.0 on the top-20 logits and require the
// same argmax wherever llama.cpp's top two are further apart than that.
constexpr double kLogitTolerance = 1.0;

std::vector<float> forward_all(const LoadedModel& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  const int32_t n_vocab = m.model->config().n_vocab;
  const auto k = static_cast<int32_t>(tokens.size());
  KvCache cache(m.model->config(), 512);
  std::vector<int32_t> positions(k), rows(k);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(static_cast<size_t>(k) * n_vocab);
  m.model->forward(tokens, positions, cache, rows, logits.data(), pool);
  return logits;
}

TEST_F(RealModelOracle, LogitsMatchLlamaCppAtSeveralPositions) {
  const int32_t n_vocab = model_->model->config().n_vocab;
  double worst_abs = 0;
  int checked = 0;
  for (const auto& case_ : fixture_["logits"]) {
    const std::vector<float> logits = forward_all(*model_, case_["tokens"]);
    for (const auto& at : case_["positions"]) {
      const int pos = at["pos"];
      const float* row = logits.data() + static_cast<size_t>(pos) * n_vocab;
      const auto& top = at["top"];
      const auto argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
      const double gap = top[0][1].get<double>() - top[1][1].get<double>();
      if (gap > kLogitTolerance) {
        EXPECT_EQ(argmax, at["argmax"].get<int32_t>()) << case_["text"] << " pos " << pos;
      }
      double l2 = 0;
      for (int32_t i = 0; i < n_vocab; ++i) l2 += static_cast<double>(row[i]) * row[i];
      EXPECT_NEAR(std::sqrt(l2), at["l2"].get<double>(), 0.05 * at["l2"].get<double>());
      for (const auto& entry : top) {
        const int32_t id = entry[0];
        const double diff = std::abs(row[id] - entry[1].get<double>());
        worst_abs = std::max(worst_abs, diff);
        EXPECT_LT(diff, kLogitTolerance) << case_["text"] << " pos " << pos << " id " << id;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
  std::cout << "worst |ours - llama.cpp| over top-20 logits at " << checked
            << " positions: " << worst_abs << "\n";
}

// Teacher forcing: run llama.cpp's whole greedy output through our model in one pass and check
// that at every step we would have picked the same token, or that the step is a near-tie for us
// too. This tests the model along the oracle's trajectory without the chaos of free running.
TEST_F(RealModelOracle, GreedyTrajectoryOfLlamaCppIsOursToo) {
  const int32_t n_vocab = model_->model->config().n_vocab;
  for (const auto& gen : fixture_["generate"]) {
    std::vector<int32_t> tokens = gen["prompt_tokens"];
    const auto n_prompt = static_cast<int32_t>(tokens.size());
    const std::vector<int32_t> generated = gen["tokens"];
    tokens.insert(tokens.end(), generated.begin(), generated.end());
    const std::vector<float> logits = forward_all(*model_, tokens);
    int exact = 0;
    for (size_t i = 0; i < generated.size(); ++i) {
      const float* row = logits.data() + static_cast<size_t>(n_prompt - 1 + i) * n_vocab;
      const float best = *std::max_element(row, row + n_vocab);
      if (row[generated[i]] == best) {
        ++exact;
      } else {
        EXPECT_LT(best - row[generated[i]], kLogitTolerance)
            << gen["kind"] << ": llama.cpp's token " << generated[i] << " at step " << i
            << " is not a near-tie for us";
      }
    }
    EXPECT_GE(exact, static_cast<int>(generated.size()) * 9 / 10) << gen["kind"];
    std::cout << gen["kind"] << ": our argmax equals llama.cpp's greedy token at " << exact
              << " of " << generated.size() << " steps\n";
  }
}

// Free running, the two implementations follow the same path until a near-tie tips one of them
// the other way; the prompts' openings are not near-ties, so at least those must be identical.
TEST_F(RealModelOracle, GreedyGenerationStartsLikeLlamaCpp) {
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
    size_t same = 0;
    while (same < r.tokens.size() && same < expected.size() && r.tokens[same] == expected[same]) {
      ++same;
    }
    std::cout << gen["kind"] << ": identical for the first " << same << " of " << expected.size()
              << " greedy tokens\n";
    EXPECT_GE(same, 6u) << gen["kind"] << "\nours:   " << r.text
                        << "\noracle: " << gen["text"].get<std::string>();
  }
}

}  // namespace
}  // namespace specdec
