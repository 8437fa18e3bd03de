#include "engine/forward_cost.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/loaded_model.h"
#include "support/tiny_model.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

TEST(ForwardCost, OneEntryPerKWithAllRepeatsAndRatioToOneToken) {
  testing::TinyModelSpec spec;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("m.gguf"));
  LoadedModel m = LoadedModel::load(path);
  ThreadPool pool(1);
  const std::vector<int32_t> prefix = {5, 17, 99};
  const std::vector<ForwardCost> costs = measure_forward_costs(*m.model, prefix, 5, 3, pool);
  ASSERT_EQ(costs.size(), 5u);
  for (size_t i = 0; i < costs.size(); ++i) {
    EXPECT_EQ(costs[i].k, static_cast<int32_t>(i) + 1);
    ASSERT_EQ(costs[i].ms.size(), 3u);
    EXPECT_GT(costs[i].median_ms, 0.0);
    EXPECT_DOUBLE_EQ(costs[i].ratio, costs[i].median_ms / costs[0].median_ms);
  }
  EXPECT_DOUBLE_EQ(costs[0].ratio, 1.0);
}

TEST(ForwardCost, RejectsBadArguments) {
  testing::TinyModelSpec spec;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("m.gguf"));
  LoadedModel m = LoadedModel::load(path);
  ThreadPool pool(1);
  const std::vector<int32_t> prefix = {1, 2};
  EXPECT_THROW(measure_forward_costs(*m.model, {}, 4, 1, pool), Error);
  EXPECT_THROW(measure_forward_costs(*m.model, prefix, 0, 1, pool), Error);
  EXPECT_THROW(measure_forward_costs(*m.model, prefix, 4, 0, pool), Error);
  const std::vector<int32_t> huge(static_cast<size_t>(m.model->config().n_ctx_train) + 1, 1);
  EXPECT_THROW(measure_forward_costs(*m.model, huge, 4, 1, pool), Error);
}

TEST(ForwardCost, StepCostsTimeEveryModelRotatedWithRatiosToTheFirst) {
  testing::TinyModelSpec spec;
  LoadedModel big =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("b.gguf")));
  spec.n_layer = 1;
  spec.seed = 2;
  LoadedModel small =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("s.gguf")));
  ThreadPool pool(1);
  const std::vector<int32_t> prefix = {5, 17, 99, 4};
  std::vector<StepSubject> subjects(3);
  subjects[0].model = big.model.get();
  subjects[1].model = small.model.get();
  subjects[2].model = small.model.get();
  const std::vector<int32_t> rows = {0, 1, 2, 3};
  subjects[2].vocab = VocabSubset::from_ids(rows, small.model->config().n_vocab);
  const std::vector<ForwardCost> costs = measure_step_costs(subjects, prefix, 4, pool);
  ASSERT_EQ(costs.size(), 3u);
  for (const ForwardCost& c : costs) {
    EXPECT_EQ(c.k, 1);
    ASSERT_EQ(c.ms.size(), 4u);
    ASSERT_EQ(c.cpu_ms.size(), 4u);
    EXPECT_GT(c.median_ms, 0.0);
    EXPECT_DOUBLE_EQ(c.ratio, c.median_ms / costs[0].median_ms);
  }
  EXPECT_DOUBLE_EQ(costs[0].ratio, 1.0);

  EXPECT_THROW(measure_step_costs({}, prefix, 1, pool), Error);
  EXPECT_THROW(measure_step_costs(subjects, {}, 1, pool), Error);
  EXPECT_THROW(measure_step_costs(subjects, prefix, 0, pool), Error);
  std::vector<StepSubject> no_model(1);
  EXPECT_THROW(measure_step_costs(no_model, prefix, 1, pool), Error);
  const std::vector<int32_t> huge(static_cast<size_t>(big.model->config().n_ctx_train), 1);
  EXPECT_THROW(measure_step_costs(subjects, huge, 1, pool), Error);
}

}  // namespace
}  // namespace specdec
