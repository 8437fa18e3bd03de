// A real model, when it has been fetched (scripts/fetch-models.sh): SmolLM2-135M-Instruct Q4_1.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

std::string smollm2_path() {
  const char* dir = std::getenv("SPECDEC_MODELS");
  const char* home = std::getenv("HOME");
  const std::string base = dir ? dir : (std::string(home ? home : "") + "/.cache/specdec/models");
  return base + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(SmolLM2, LoadsAndRuns) {
  const std::string path = smollm2_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model not found: " << path;
  auto file = gguf::GgufFile::open(path);
  auto model = Model::load(*file);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.n_embd, 576);
  EXPECT_EQ(c.n_head, 9);
  EXPECT_EQ(c.n_head_kv, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 1536);
  EXPECT_EQ(c.n_vocab, 49152);
  EXPECT_TRUE(c.tied_output);
  EXPECT_GT(model->weight_bytes(), 50u << 20);

  // "The capital of France is", tokenized by hand (GPT-2 byte encoding: "Ġ" is a space);
  // a sane forward pass predicts " Paris" next.
  const auto& vocab = file->get_array("tokenizer.ggml.tokens").strings;
  auto id = [&](const std::string& piece) {
    const auto it = std::find(vocab.begin(), vocab.end(), piece);
    EXPECT_NE(it, vocab.end()) << piece;
    return static_cast<int32_t>(it - vocab.begin());
  };
  const std::vector<int32_t> prompt = {id("The"), id("Ġcapital"), id("Ġof"), id("ĠFrance"),
                                       id("Ġis")};
  ThreadPool pool(2);
  KvCache batch_cache(c, 64), step_cache(c, 64);
  const std::vector<float> batch = testing::forward_all(*model, batch_cache, prompt, 0, pool);
  for (float v : batch) ASSERT_TRUE(std::isfinite(v));
  std::vector<float> steps;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const auto one =
        testing::forward_all(*model, step_cache, {prompt[i]}, static_cast<int32_t>(i), pool);
    steps.insert(steps.end(), one.begin(), one.end());
  }
  EXPECT_TRUE(testing::bitwise_equal(batch, steps));
  const auto last = batch.end() - c.n_vocab;
  EXPECT_EQ(std::max_element(last, batch.end()) - last, id("ĠParis"));

  // Greedy decode timing at 2 threads (informational; shared CI cores make it noisy).
  constexpr int kSteps = 16;
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  int32_t token = prompt.back();
  const std::vector<int32_t> row = {0};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    const std::vector<int32_t> tok = {token}, pos = {step_cache.length()};
    model->forward(tok, pos, step_cache, row, logits.data(), pool);
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      kSteps;
  RecordProperty("decode_ms_per_token_t2", std::to_string(ms));
  std::printf("SmolLM2 decode: %.2f ms/token at 2 threads\n", ms);
}

}  // namespace
}  // namespace specdec
