// Real models against llama.cpp: logits at several positions, tokenization of the prompts, and
// 64-token greedy generations, from fixtures that scripts/oracle/gen_logit_fixtures.py recorded
// with llama-cpp-python. SmolLM2-135M (llama), Gemma 3 270M (gemma3; one prompt is longer
// than its 512-token sliding window) and the Qwen2.5-Coder 1.5B (Q4_K_M) / 0.5B (Q5_0, Q8_0,
// Q4_K, Q6_K) pair (qwen2; code and ChatML prompts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/engine.h"
#include "support/real_models.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

// How close is close enough. The fixture comes from llama.cpp's single-row kernels (one token
// per decode, no weight repacking, f32 KV cache), which compute what our kernels compute: on the
// 2-layer models in tests/tiny_oracle_test.cpp we agree with them to 5e-5 for every weight type.
// Over SmolLM2's 30 layers, last-bit differences elsewhere (reduction order in attention, exp in
// softmax and SiLU) occasionally flip the Q8 rounding of an activation, and the flips compound:
// llama.cpp itself moves by up to 0.70 between its batched and one-token evaluation of the same
// prompt, and by up to 1.38 between its f32 and f16 KV caches
// (scripts/oracle/llama_cpp_self_variation.py). We allow 1.0 on the top-20 logits and require the
// same argmax wherever llama.cpp's top two are further apart than that.
// Gemma 3 270M (18 layers) is held to 1.5 on the top-20 and 8 % on the logit row's norm (the
// others: 5 %): one position (the Fibonacci prompt, pos 30) is chaotic for it, its fp16 GELU
// table turning last-bit differences into visibly different activations. There the one-row
// K-quant kernels gave 0.82 (norm within 5 %), with no packed kernels at all
// (SPECDEC_NO_PACK=1) 1.06, the scalar path 1.02 (norm 5.4 % off), and the packed K-quant kernels
// (8-row groups, every path) give 1.42 (norm 6.3 % off); every other position stays within 1.0.
//
// The Qwen2.5-Coder models (28 and 24 layers) are held to 0.75: measured worst cases 0.37 (1.5B)
// and 0.33 (0.5B), and llama.cpp's own spread on them is 0.56 / 0.44 (batched vs one-token
// evaluation, full logit rows, f32 KV) and 0.56 / 0.61 (f16 vs f32 KV cache), so 0.75 leaves what
// llama.cpp itself varies by plus a margin, and no more (llama_cpp_self_variation.py on "The
// capital of France is" and a code prompt; numbers in docs/models.md).
struct RealModelCase {
  const char* name;      // test-name suffix
  const char* file;      // in the model cache
  const char* fixture;   // in tests/fixtures
  int32_t n_ctx;         // KV cache size; the longest fixture sequence must fit
  double tolerance;      // on the top-20 logits
  double l2_rel = 0.05;  // on the norm of the whole logit row, relative
};

const RealModelCase kCases[] = {
    {"SmolLM2", "SmolLM2-135M-Instruct.Q4_1.gguf", "oracle_smollm2.json", 512, 1.0},
    {"Gemma3", "gemma-3-270m-q4_k_m.gguf", "oracle_gemma3.json", 1024, 1.5, 0.08},
    {"Qwen25Coder15B", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "oracle_qwen2.5-coder-1.5b.json",
     512, 0.75},
    {"Qwen25Coder05B", "qwen2.5-coder-0.5b-instruct.gguf", "oracle_qwen2.5-coder-0.5b.json", 512,
     0.75},
};

void PrintTo(const RealModelCase& c, std::ostream* os) { *os << c.name; }

nlohmann::json load_fixture(const std::string& name) {
  std::ifstream in(testing::fixture_path(name));
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  return nlohmann::json::parse(in);
}

class RealModelOracle : public ::testing::TestWithParam<RealModelCase> {
 protected:
  void SetUp() override {
    const RealModelCase& c = GetParam();
    auto path = testing::require_real_model(c.file);
    if (!path) GTEST_SKIP() << testing::missing_model_message(c.file);
    model_ = std::make_unique<LoadedModel>(LoadedModel::load(*path));
    fixture_ = load_fixture(c.fixture);
    tolerance_ = c.tolerance;
    l2_rel_ = c.l2_rel;
    n_ctx_ = c.n_ctx;
  }
  std::unique_ptr<LoadedModel> model_;
  nlohmann::json fixture_;
  double tolerance_ = 0, l2_rel_ = 0;
  int32_t n_ctx_ = 0;
};

TEST_P(RealModelOracle, TokenizesPromptsLikeLlamaCpp) {
  for (const auto& case_ : fixture_["logits"]) {
    auto ids = model_->tokenizer->encode(case_["text"].get<std::string>(), true, true);
    EXPECT_EQ(ids, case_["tokens"].get<std::vector<int32_t>>()) << case_["text"];
  }
  for (const auto& gen : fixture_["generate"]) {
    auto ids = model_->tokenizer->encode(gen["prompt"].get<std::string>(), true, true);
    EXPECT_EQ(ids, gen["prompt_tokens"].get<std::vector<int32_t>>()) << gen["prompt"];
  }
}

// Logits of the listed rows (all rows when empty), one n_vocab row each, in one forward pass.
std::vector<float> forward_all(const LoadedModel& m, const std::vector<int32_t>& tokens,
                               int32_t n_ctx, std::vector<int32_t> rows = {}) {
  ThreadPool pool(2);
  const int32_t n_vocab = m.model->config().n_vocab;
  const auto k = static_cast<int32_t>(tokens.size());
  KvCache cache(m.model->config(), n_ctx);
  std::vector<int32_t> positions(k);
  std::iota(positions.begin(), positions.end(), 0);
  if (rows.empty()) {
    rows.resize(k);
    std::iota(rows.begin(), rows.end(), 0);
  }
  std::vector<float> logits(rows.size() * n_vocab);
  m.model->forward(tokens, positions, cache, rows, logits.data(), pool);
  return logits;
}

TEST_P(RealModelOracle, LogitsMatchLlamaCppAtSeveralPositions) {
  const int32_t n_vocab = model_->model->config().n_vocab;
  double worst_abs = 0;
  int checked = 0;
  for (const auto& case_ : fixture_["logits"]) {
    std::vector<int32_t> rows;  // gemma's 262k-entry rows over a 700-token prompt: only these
    for (const auto& at : case_["positions"]) rows.push_back(at["pos"]);
    const std::vector<float> logits = forward_all(*model_, case_["tokens"], n_ctx_, rows);
    for (size_t j = 0; j < rows.size(); ++j) {
      const auto& at = case_["positions"][j];
      const int pos = rows[j];
      const float* row = logits.data() + j * n_vocab;
      const auto& top = at["top"];
      const auto argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
      const double gap = top[0][1].get<double>() - top[1][1].get<double>();
      if (gap > tolerance_) {
        EXPECT_EQ(argmax, at["argmax"].get<int32_t>()) << case_["text"] << " pos " << pos;
      }
      double l2 = 0;
      for (int32_t i = 0; i < n_vocab; ++i) l2 += static_cast<double>(row[i]) * row[i];
      EXPECT_NEAR(std::sqrt(l2), at["l2"].get<double>(), l2_rel_ * at["l2"].get<double>());
      for (const auto& entry : top) {
        const int32_t id = entry[0];
        const double diff = std::abs(row[id] - entry[1].get<double>());
        worst_abs = std::max(worst_abs, diff);
        EXPECT_LT(diff, tolerance_) << case_["text"] << " pos " << pos << " id " << id;
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
TEST_P(RealModelOracle, GreedyTrajectoryOfLlamaCppIsOursToo) {
  const int32_t n_vocab = model_->model->config().n_vocab;
  for (const auto& gen : fixture_["generate"]) {
    std::vector<int32_t> tokens = gen["prompt_tokens"];
    const auto n_prompt = static_cast<int32_t>(tokens.size());
    const std::vector<int32_t> generated = gen["tokens"];
    tokens.insert(tokens.end(), generated.begin(), generated.end());
    const std::vector<float> logits = forward_all(*model_, tokens, n_ctx_);
    int exact = 0;
    for (size_t i = 0; i < generated.size(); ++i) {
      const float* row = logits.data() + static_cast<size_t>(n_prompt - 1 + i) * n_vocab;
      const float best = *std::max_element(row, row + n_vocab);
      if (row[generated[i]] == best) {
        ++exact;
      } else {
        EXPECT_LT(best - row[generated[i]], tolerance_)
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
// the other way. Fixtures with `gaps` (llama.cpp's top-1 minus top-2 logit at each step) say
// which steps are near-ties (a gap within the tolerance): the first token where we part from
// llama.cpp must be one of them, or we must not part at all. Older fixtures without gaps: the
// prompts' openings are not near-ties, so at least those must be identical.
TEST_P(RealModelOracle, GreedyGenerationStartsLikeLlamaCpp) {
  EngineOptions eo;
  eo.n_ctx = n_ctx_;
  eo.n_threads = 2;
  Engine engine(*model_, nullptr, eo);
  for (const auto& gen : fixture_["generate"]) {
    auto prompt = gen["prompt_tokens"].get<std::vector<int32_t>>();
    auto expected = gen["tokens"].get<std::vector<int32_t>>();
    GenerationOptions go;
    go.max_tokens = gen["n_predict"];
    go.sampling.temperature = 0;
    // Stop once our text is no longer a prefix of llama.cpp's: we have parted by then, and the
    // rest would cost seconds of decoding (the 1.5B makes ~15 tokens/s on 2 threads).
    const std::string oracle_text = gen["text"];
    std::string text;
    GenerationResult r = engine.generate(prompt, go, [&](std::string_view piece) {
      text += piece;
      return oracle_text.starts_with(text);
    });
    size_t same = 0;
    while (same < r.tokens.size() && same < expected.size() && r.tokens[same] == expected[same]) {
      ++same;
    }
    std::cout << gen["kind"] << ": identical for the first " << same << " of " << expected.size()
              << " greedy tokens";
    if (!gen.contains("gaps")) {
      std::cout << "\n";
      EXPECT_GE(same, 6u) << gen["kind"] << "\nours:   " << r.text << "\noracle: " << oracle_text;
      continue;
    }
    const auto gaps = gen["gaps"].get<std::vector<double>>();
    ASSERT_EQ(gaps.size(), expected.size());
    size_t first_near_tie = 0;
    while (first_near_tie < gaps.size() && gaps[first_near_tie] > tolerance_) ++first_near_tie;
    std::cout << " (llama.cpp's first near-tie: step " << first_near_tie;
    if (same < expected.size()) std::cout << "; its top-2 gap where we part: " << gaps[same];
    std::cout << ")\n";
    if (same < expected.size()) {
      EXPECT_LE(gaps[same], tolerance_) << gen["kind"] << ": we part from llama.cpp at step "
                                        << same << ", which is no near-tie\nours:   " << r.text
                                        << "\noracle: " << gen["text"].get<std::string>();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelOracle, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace specdec
