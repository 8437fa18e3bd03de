#include "engine/self_check.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "engine/layer_draft.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

// A target and an unrelated random draft with the same vocabulary: acceptance is far from 1,
// so the corrections (the part that is easy to get wrong) are exercised on most rounds.
class SelfCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec t;
    t.n_vocab = 300;
    t.seed = 11;
    testing::TinyModelSpec d = t;
    d.seed = 12;
    d.n_layer = 1;
    target_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(t, testing::temp_path("t.gguf"))));
    draft_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(d, testing::temp_path("d.gguf"))));
  }
  std::unique_ptr<LoadedModel> target_, draft_;
};

TEST_F(SelfCheckTest, SpeculativeAndPlainSamplesAgreeAndAcceptanceMatchesAnalytic) {
  EngineOptions eo;
  eo.n_ctx = 64;
  Engine engine(*target_, draft_.get(), eo);
  SelfCheckOptions o;
  o.prompts = {"ab", "hello"};
  o.samples = 300;
  o.tokens = 2;
  o.generation.sampling.temperature = 1.0f;
  o.generation.sampling.top_k = 8;
  o.generation.sampling.top_p = 1.0f;
  o.generation.sampling.min_p = 0.0f;
  o.generation.sampling.seed = 99;
  o.generation.draft_max = 3;
  o.generation.ignore_eos = true;
  int64_t last = 0;
  SelfCheckReport r = run_self_check(engine, o, [&](int64_t done, int64_t) { last = done; });
  EXPECT_EQ(last, 2 * 2 * 300);
  ASSERT_EQ(r.prompts.size(), 2u);
  for (const PromptCheck& c : r.prompts) {
    EXPECT_GT(c.chi.dof, 0);
    EXPECT_GT(c.chi.p_value, 1e-4) << c.prompt;
    EXPECT_GT(c.tv_null, 0);
  }
  EXPECT_TRUE(r.distribution_ok);
  EXPECT_GT(r.tested, 0);
  EXPECT_LT(r.measured_acceptance, 0.95);  // a random draft must not look like the target
  EXPECT_TRUE(r.acceptance_ok) << r.measured_acceptance << " vs " << r.analytic_acceptance;
}

TEST_F(SelfCheckTest, NeedsADraftAndSensibleOptions) {
  EngineOptions eo;
  eo.n_ctx = 64;
  Engine plain(*target_, nullptr, eo);
  SelfCheckOptions o;
  o.prompts = {"x"};
  EXPECT_THROW(run_self_check(plain, o), Error);
  Engine spec(*target_, draft_.get(), eo);
  o.samples = 1;
  EXPECT_THROW(run_self_check(spec, o), Error);
}

}  // namespace
}  // namespace specdec
