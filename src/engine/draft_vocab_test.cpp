#include "engine/draft_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "engine/engine.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

bool contains(const VocabSubset& s, int32_t id) {
  return std::binary_search(s.ids().begin(), s.ids().end(), id);
}

class DraftVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec t;
    t.seed = 1;
    target_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(t, testing::temp_path("dv_target.gguf"))));
    testing::TinyModelSpec d;
    d.seed = 2;
    d.n_layer = 1;
    draft_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(d, testing::temp_path("dv_draft.gguf"))));
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete target_;
  }
  static LoadedModel* target_;
  static LoadedModel* draft_;
};
LoadedModel* DraftVocab::target_ = nullptr;
LoadedModel* DraftVocab::draft_ = nullptr;

// BPE: the lowest ids (merge order) plus every control token, the end of text among them.
TEST_F(DraftVocab, BpeSubsetIsTheLowestIdsPlusControlTokens) {
  const Tokenizer& tok = *draft_->tokenizer;
  const auto s = draft_vocab_subset(tok, 20);
  ASSERT_TRUE(s.has_value());
  for (int32_t id = 0; id < 20; ++id) EXPECT_TRUE(contains(*s, id)) << id;
  EXPECT_FALSE(contains(*s, 100));
  EXPECT_TRUE(contains(*s, tok.eos()));
  for (int32_t id : tok.eog_ids()) EXPECT_TRUE(contains(*s, id)) << id;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.token_type(id) == kTokenControl) {
      EXPECT_TRUE(contains(*s, id)) << id;
    }
  }
  EXPECT_LT(s->width(), tok.n_vocab());
}

TEST_F(DraftVocab, NoSubsetForZeroOrTheWholeVocabulary) {
  const Tokenizer& tok = *draft_->tokenizer;
  EXPECT_FALSE(draft_vocab_subset(tok, 0).has_value());
  EXPECT_FALSE(draft_vocab_subset(tok, tok.n_vocab()).has_value());
  EXPECT_FALSE(draft_vocab_subset(tok, tok.n_vocab() + 5).has_value());
}

// End to end through the engine: a draft that scores 40 tokens changes the speed, never the
// greedy text; every accepted draft is a subset token, and some tokens outside it were
// produced (by target corrections), so the truncation mattered.
TEST_F(DraftVocab, EngineWithTruncatedDraftKeepsGreedyTextAndDraftsOnlySubsetTokens) {
  EngineOptions eo;
  eo.n_ctx = 128;
  eo.n_threads = 2;
  Engine plain(*target_, nullptr, eo);
  EngineOptions sub = eo;
  sub.draft_vocab = 40;
  Engine spec(*target_, draft_, sub);
  const auto subset = draft_vocab_subset(*draft_->tokenizer, 40);
  ASSERT_TRUE(subset.has_value());
  EXPECT_EQ(spec.draft_vocab_width(), subset->width());
  Engine full(*target_, draft_, eo);
  EXPECT_EQ(full.draft_vocab_width(), draft_->tokenizer->n_vocab());
  int64_t drafted = 0, outside = 0;
  for (int p = 0; p < 6; ++p) {
    const std::vector<int32_t> prompt = {65 + p, 66, 10 + 3 * p, 67};
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.draft_max = 4;
    const GenerationResult want = plain.generate(prompt, go, {});
    const GenerationResult got = spec.generate(prompt, go, {});
    ASSERT_EQ(got.tokens, want.tokens) << "prompt " << p;
    ASSERT_EQ(got.origins.size(), got.tokens.size());
    for (size_t i = 0; i < got.tokens.size(); ++i) {
      if (got.origins[i] == TokenOrigin::Draft) {
        EXPECT_TRUE(contains(*subset, got.tokens[i])) << got.tokens[i];
        ++drafted;
      }
      if (!contains(*subset, got.tokens[i])) ++outside;
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(outside, 0);
}

TEST_F(DraftVocab, NegativeSizeIsRefused) {
  EngineOptions eo;
  eo.draft_vocab = -1;
  EXPECT_THROW(Engine(*target_, draft_, eo), Error);
}

}  // namespace
}  // namespace specdec
