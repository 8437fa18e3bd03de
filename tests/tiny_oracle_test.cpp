// Tiny random-weight llama, qwen2, gemma3 and qwen3 models (every weight type) against llama.cpp's
// logits, recorded by scripts/oracle/gen_tiny_fixtures.py with llama-cpp-python. No download
// needed. This is what checks qwen2's NEOX RoPE and Q/K/V biases, gemma3's block (embedding
// scale, Q/K norms, post-norms, GELU, sliding window over 20 tokens with a window of 4, local and
// global RoPE bases), qwen3's (per-head Q/K norms before NEOX RoPE, heads wider than n_embd /
// n_head, no biases) and each quant format end to end against an independent implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/loaded_model.h"
#include "support/real_models.h"
#include "tensor/cpu_features.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

struct Comparison {
  double max_abs = 0, max_logit = 0;
  int argmax_disagree_clear = 0;  // disagreements where llama.cpp's top-2 gap was not a near-tie
};

Comparison compare_with_llama_cpp(const std::string& name) {
  const std::string dir = testing::fixture_path("oracle_tiny");
  std::ifstream in(dir + "/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  nlohmann::json fx = nlohmann::json::parse(in);
  LoadedModel m = LoadedModel::load(dir + "/" + name + ".gguf");
  auto tokens = fx["tokens"].get<std::vector<int32_t>>();
  const auto k = static_cast<int32_t>(tokens.size());
  const int32_t n_vocab = m.model->config().n_vocab;
  KvCache cache(m.model->config(), 64);
  std::vector<int32_t> pos(k), rows(k);
  std::iota(pos.begin(), pos.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(static_cast<size_t>(k) * n_vocab);
  ThreadPool pool(2);
  m.model->forward(tokens, pos, cache, rows, logits.data(), pool);

  Comparison c;
  const auto& expected = fx["logits"];
  for (int32_t t = 0; t < k; ++t) {
    std::vector<double> e = expected[t].get<std::vector<double>>();
    const float* row = logits.data() + static_cast<size_t>(t) * n_vocab;
    for (int32_t i = 0; i < n_vocab; ++i) {
      c.max_abs = std::max(c.max_abs, std::abs(row[i] - e[i]));
      c.max_logit = std::max(c.max_logit, std::abs(e[i]));
    }
    auto ours = std::max_element(row, row + n_vocab) - row;
    std::vector<double> sorted = e;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    auto theirs = std::max_element(e.begin(), e.end()) - e.begin();
    if (ours != theirs && sorted[0] - sorted[1] > 0.05) ++c.argmax_disagree_clear;
  }
  return c;
}

class TinyOracle : public ::testing::TestWithParam<std::string> {};

// Tolerances: F32 models should agree to float rounding. Quantized ones round activations to
// Q8 exactly as llama.cpp does, so only accumulation order differs; F16 rounds activations to
// F16 on both sides. The fixtures come from llama.cpp's x86 SIMD build, whose float summation
// order our SIMD kernels share; the scalar kernels sum in another order, and where an activation
// sits on a Q8 rounding boundary that flips one quantized value: measured 0.15 and 0.12 on two
// of the 21 models (llama_q5_k, qwen2_q4_k), the rest below 1e-4. The packed K-quant kernels
// (every path, unless SPECDEC_NO_PACK) sum each 8-row group in their own order as well, which
// flips the same value: qwen2_q4_k 0.12, the other K-quant models below 1e-4. So the scalar path
// and packed K-quant models get a looser bound; clear argmax disagreements are checked on every
// path.
bool k_quants_packed(const std::string& name) {
  const char* no_pack = std::getenv("SPECDEC_NO_PACK");
  const bool packing = no_pack == nullptr || *no_pack == '\0' || std::string(no_pack) == "0";
  return packing && name.ends_with("_k");
}

double tolerance(const std::string& name) {
  if (name.ends_with("f32")) return 1e-3;
  if (name.ends_with("f16")) return 2e-2;
  return active_isa() == Isa::kScalar || k_quants_packed(name) ? 0.3 : 5e-2;
}

TEST_P(TinyOracle, LogitsMatchLlamaCpp) {
  const std::string name = GetParam();
  Comparison c = compare_with_llama_cpp(name);
  std::cout << name << ": max |ours - llama.cpp| = " << c.max_abs << " (max |logit| " << c.max_logit
            << ")\n";
  EXPECT_LT(c.max_abs, tolerance(name)) << name;
  EXPECT_EQ(c.argmax_disagree_clear, 0) << name;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(testing::fixture_path("oracle_tiny"))) {
    if (e.path().extension() == ".gguf") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TinyOracle, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) { return info.param; });

TEST(TinyOracleFixtures, CoverEveryWeightTypeAndEveryArchitecture) {
  auto names = fixture_names();
  EXPECT_GE(names.size(), 21u);
  for (const char* required :
       {"llama_f32", "llama_f16", "llama_q8_0", "llama_q4_0", "llama_q4_1", "llama_q5_0",
        "llama_q5_1", "llama_q4_k", "llama_q5_k", "llama_q6_k", "qwen2_f32", "qwen2_q4_k",
        "gemma3_f32", "gemma3_q8_0", "gemma3_q5_0", "gemma3_mixed", "qwen3_f32", "qwen3_q8_0",
        "qwen3_q4_k"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
}

}  // namespace
}  // namespace specdec
