#include "engine/model_lm.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "engine/loaded_model.h"
#include "support/tiny_model.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

std::vector<int32_t> prompt_of(int32_t n) {
  std::vector<int32_t> p;
  for (int32_t t = 0; t < n; ++t) p.push_back(40 + (t * 11) % 200);
  return p;
}

// Every K/V entry of the first n positions, layer by layer, head by head.
std::vector<float> entries(const ModelLM& lm, const ModelConfig& c, int32_t n) {
  std::vector<float> out;
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (int32_t h = 0; h < c.n_head_kv; ++h) {
      for (int32_t e = 0; e < n; ++e) {
        const float* k = lm.cache().k(l, h, e);
        const float* v = lm.cache().v(l, h, e);
        out.insert(out.end(), k, k + c.head_dim);
        out.insert(out.end(), v, v + c.head_dim);
      }
    }
  }
  return out;
}

class ModelLMPrefixHooks : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    model_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("m.gguf"))));
  }
  const ModelConfig& config() const { return model_->model->config(); }
  std::unique_ptr<LoadedModel> model_;
  ThreadPool pool_{1};
};

TEST_F(ModelLMPrefixHooks, CopiedRowsAreSkippedAndTheResultIsWhatComputingThemGives) {
  const std::vector<int32_t> p = prompt_of(23);
  ModelLM source(*model_->model, 64, pool_), reference(*model_->model, 64, pool_);
  std::vector<float> want;
  source.forward_last(std::span(p).first(15), nullptr);  // holds p's first 15 rows
  reference.forward_last(p, &want);

  // Chunks of 4: the copy takes rows 0..14 before the first chunk (of at most the 22 rows that
  // need no logits), then nothing more; two chunks read rows 15..22 and report each.
  ModelLM lm(*model_->model, 64, pool_);
  lm.set_coordinator(nullptr, 4);
  std::vector<int32_t> asked, lengths;
  lm.set_prefix_hooks(
      [&](int32_t max) {
        asked.push_back(max);
        if (lm.length() < 15) lm.extend_from(source, std::min(15, lm.length() + max));
      },
      [&] { lengths.push_back(lm.length()); });
  std::vector<float> got;
  lm.forward_last(p, &got);
  EXPECT_EQ(asked, (std::vector<int32_t>{22, 3}));
  EXPECT_EQ(lengths, (std::vector<int32_t>{19, 23}));
  EXPECT_EQ(got, want);
  EXPECT_EQ(entries(lm, config(), 23), entries(reference, config(), 23));

  // Without logits every row may be copied, and a call whose rows were all copied runs no pass.
  ModelLM whole(*model_->model, 64, pool_);
  lengths.clear();
  whole.set_prefix_hooks([&](int32_t max) { whole.extend_from(source, whole.length() + max); },
                         [&] { lengths.push_back(whole.length()); });
  whole.forward_last(std::span(p).first(15), nullptr);
  EXPECT_EQ(whole.length(), 15);
  EXPECT_TRUE(lengths.empty());
  EXPECT_EQ(entries(whole, config(), 15), entries(reference, config(), 15));
}

TEST_F(ModelLMPrefixHooks, ACopyPastWhatWasAskedFails) {
  const std::vector<int32_t> p = prompt_of(12);
  ModelLM source(*model_->model, 64, pool_);
  source.forward_last(p, nullptr);
  ModelLM lm(*model_->model, 64, pool_);
  // The last row's logits are wanted, so only 11 rows may be copied.
  lm.set_prefix_hooks([&](int32_t max) { lm.extend_from(source, max + 1); }, {});
  std::vector<float> logits;
  EXPECT_THROW(lm.forward_last(p, &logits), Error);
}

}  // namespace
}  // namespace specdec
