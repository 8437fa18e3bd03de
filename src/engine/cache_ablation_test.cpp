#include "engine/cache_ablation.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/engine.h"
#include "support/tiny_model.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

// Recomputing the prefix must reach the same tokens as the cache (the forward pass is batch
// invariant), and the same ones the engine's target-only greedy decoding produces; otherwise
// the ablation would compare different work.
TEST(CacheAblation, WithAndWithoutCacheGenerateTheEngineGreedyTokens) {
  testing::TinyModelSpec spec;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("m.gguf"));
  LoadedModel m = LoadedModel::load(path);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {5, 17, 99, 230, 41};
  GreedyTiming cached = greedy_with_cache(*m.model, prompt, 12, pool);
  GreedyTiming uncached = greedy_without_cache(*m.model, prompt, 12, pool);
  ASSERT_EQ(cached.tokens.size(), 12u);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  EXPECT_GT(cached.total_ms, 0.0);
  EXPECT_GT(uncached.total_ms, 0.0);

  EngineOptions eo;
  eo.n_ctx = 64;
  Engine engine(m, nullptr, eo);
  GenerationOptions go;
  go.max_tokens = 12;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  EXPECT_EQ(engine.generate(prompt, go, {}).tokens, cached.tokens);
}

TEST(CacheAblation, RejectsEmptyPromptAndZeroTokens) {
  testing::TinyModelSpec spec;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("m.gguf"));
  LoadedModel m = LoadedModel::load(path);
  ThreadPool pool(1);
  EXPECT_THROW(greedy_with_cache(*m.model, {}, 4, pool), Error);
  const std::vector<int32_t> prompt = {1};
  EXPECT_THROW(greedy_without_cache(*m.model, prompt, 0, pool), Error);
}

}  // namespace
}  // namespace specdec
