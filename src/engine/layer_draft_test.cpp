#include "engine/layer_draft.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/engine.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

TEST(LayerDraft, KeepsFirstBlocksAndVocabularyAndRuns) {
  testing::TinyModelSpec spec;
  spec.n_layer = 3;
  const std::string target_path = testing::write_tiny_model(spec, testing::temp_path("t.gguf"));
  auto target_file = gguf::GgufFile::open(target_path);
  const std::string draft_path = testing::temp_path("d.gguf");
  write_layer_draft(*target_file, 1, draft_path);

  auto draft_file = gguf::GgufFile::open(draft_path);
  EXPECT_EQ(draft_file->get_int("llama.block_count"), 1);
  EXPECT_NE(draft_file->find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(draft_file->find_tensor("blk.1.attn_q.weight"), nullptr);
  EXPECT_EQ(draft_file->find_tensor("blk.2.ffn_down.weight"), nullptr);
  EXPECT_NE(draft_file->find_tensor("output_norm.weight"), nullptr);
  EXPECT_EQ(draft_file->get_array("tokenizer.ggml.tokens").strings,
            target_file->get_array("tokenizer.ggml.tokens").strings);

  // It loads as a model, passes the vocabulary check and drives speculative decoding whose
  // greedy output equals the target's own.
  LoadedModel target = LoadedModel::load(target_path);
  LoadedModel draft = LoadedModel::load(draft_path);
  EngineOptions eo;
  eo.n_ctx = 128;
  Engine spec_engine(target, &draft, eo);
  Engine plain_engine(target, nullptr, eo);
  GenerationOptions go;
  go.max_tokens = 24;
  go.sampling.temperature = 0;
  go.draft_max = 3;
  go.ignore_eos = true;
  std::vector<int32_t> prompt = {10, 20, 30, 40};
  auto a = spec_engine.generate(prompt, go, {});
  auto b = plain_engine.generate(prompt, go, {});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_TRUE(a.stats.speculative);
  EXPECT_GT(a.stats.spec.rounds, 0);
}

TEST(LayerDraft, RejectsLayerCountsOutsideTheModel) {
  testing::TinyModelSpec spec;
  spec.n_layer = 2;
  auto file = gguf::GgufFile::open(testing::write_tiny_model(spec, testing::temp_path("t.gguf")));
  EXPECT_THROW(write_layer_draft(*file, 0, testing::temp_path("x.gguf")), Error);
  EXPECT_THROW(write_layer_draft(*file, 2, testing::temp_path("x.gguf")), Error);
}

}  // namespace
}  // namespace specdec
