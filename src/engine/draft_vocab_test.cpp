#include "engine/draft_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/token_ranking.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

bool contains(const VocabSubset& s, int32_t id) {
  return std::find(s.ids().begin(), s.ids().end(), id) != s.ids().end();
}

// A head order that is not the id order (so that row -> id mapping is exercised): the ids
// reversed.
std::vector<int32_t> reversed_ids(int32_t v) {
  std::vector<int32_t> ids(static_cast<size_t>(v));
  for (int32_t r = 0; r < v; ++r) ids[static_cast<size_t>(r)] = v - 1 - r;
  return ids;
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
    const std::string path = testing::write_tiny_model(d, testing::temp_path("dv_draft.gguf"));
    draft_ = new LoadedModel(LoadedModel::load(path));
    ModelLoadOptions reordered;
    reordered.output_ids = reversed_ids(draft_->tokenizer->n_vocab());
    reordered_draft_ = new LoadedModel(LoadedModel::load(path, reordered));
  }
  static void TearDownTestSuite() {
    delete reordered_draft_;
    delete draft_;
    delete target_;
  }
  static LoadedModel* target_;
  static LoadedModel* draft_;
  static LoadedModel* reordered_draft_;
};
LoadedModel* DraftVocab::target_ = nullptr;
LoadedModel* DraftVocab::draft_ = nullptr;
LoadedModel* DraftVocab::reordered_draft_ = nullptr;

// Without a shipped corpus count for the vocabulary, the head order is the file's: for BPE
// the ids (merge order).
TEST_F(DraftVocab, HeadOrderOfAnUnknownBpeVocabularyIsTheIdOrder) {
  const Tokenizer& tok = *draft_->tokenizer;
  EXPECT_EQ(rank_tokens(tok).counted, 0);
  const std::vector<int32_t> order = draft_head_order(tok, tok.n_vocab());
  ASSERT_EQ(order.size(), static_cast<size_t>(tok.n_vocab()));
  for (int32_t i = 0; i < tok.n_vocab(); ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  // A model that scores fewer tokens than its tokenizer lists: only ids it has rows for.
  const std::vector<int32_t> fewer = draft_head_order(tok, 280);
  ASSERT_EQ(fewer.size(), 280u);
  EXPECT_TRUE(std::all_of(fewer.begin(), fewer.end(), [](int32_t id) { return id < 280; }));
}

// The first n rows, the prompt's tokens and every control token; each column's id is its head
// row's id.
TEST_F(DraftVocab, PromptSubsetHoldsTheFirstRowsThePromptAndTheControlTokens) {
  const Tokenizer& tok = *draft_->tokenizer;
  const int32_t v = tok.n_vocab();
  const std::vector<int32_t> head = reversed_ids(v);
  const std::vector<int32_t> prompt = {3, 4, 100};
  const auto s = draft_vocab_for_prompt(tok, head, v, 20, prompt);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->head_rows(), v);
  for (int32_t r = 0; r < 20; ++r) EXPECT_TRUE(contains(*s, head[static_cast<size_t>(r)])) << r;
  for (int32_t id : prompt) EXPECT_TRUE(contains(*s, id)) << id;
  EXPECT_TRUE(contains(*s, tok.eos()));
  for (int32_t id = 0; id < v; ++id) {
    if (tok.token_type(id) == kTokenControl || tok.is_eog(id)) {
      EXPECT_TRUE(contains(*s, id)) << id;
    }
  }
  EXPECT_FALSE(contains(*s, 150));  // far from every wanted row's group of 8
  EXPECT_LT(s->width(), v);
  // Columns follow the head's rows: range by range, row r stands for head[r].
  size_t column = 0;
  for (auto [b, e] : s->ranges()) {
    for (int32_t r = b; r < e; ++r, ++column) {
      EXPECT_EQ(s->ids()[column], head[static_cast<size_t>(r)]);
    }
  }
  EXPECT_EQ(column, s->ids().size());
  const std::set<int32_t> unique(s->ids().begin(), s->ids().end());
  EXPECT_EQ(unique.size(), s->ids().size());
}

TEST_F(DraftVocab, NoSubsetForZeroOrTheWholeHead) {
  const Tokenizer& tok = *draft_->tokenizer;
  const std::vector<int32_t> prompt = {3};
  EXPECT_FALSE(draft_vocab_for_prompt(tok, {}, tok.n_vocab(), 0, prompt).has_value());
  EXPECT_FALSE(draft_vocab_for_prompt(tok, {}, tok.n_vocab(), tok.n_vocab(), prompt).has_value());
  EXPECT_FALSE(
      draft_vocab_for_prompt(tok, {}, tok.n_vocab(), tok.n_vocab() + 5, prompt).has_value());
}

// End to end through the engine, with the draft's head in another order: a draft that scores
// 40 rows plus the prompt's tokens changes the speed, never the greedy text; every accepted
// draft is a subset token, and some tokens outside it were produced (by target corrections),
// so the truncation mattered.
TEST_F(DraftVocab, EngineWithTruncatedDraftKeepsGreedyTextAndDraftsOnlySubsetTokens) {
  EngineOptions eo;
  eo.n_ctx = 128;
  eo.n_threads = 2;
  Engine plain(*target_, nullptr, eo);
  EngineOptions sub = eo;
  sub.draft_vocab = 40;
  Engine spec(*target_, reordered_draft_, sub);
  Engine full(*target_, draft_, eo);
  int64_t drafted = 0, outside = 0;
  for (int p = 0; p < 6; ++p) {
    const std::vector<int32_t> prompt = {65 + p, 66, 10 + 3 * p, 67};
    const auto subset = draft_vocab_for_prompt(
        *draft_->tokenizer, reordered_draft_->model->logit_ids(), 300, 40, prompt);
    ASSERT_TRUE(subset.has_value());
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.draft_max = 4;
    const GenerationResult want = plain.generate(prompt, go, {});
    const GenerationResult got = spec.generate(prompt, go, {});
    ASSERT_EQ(got.tokens, want.tokens) << "prompt " << p;
    EXPECT_EQ(spec.draft_vocab_width(), subset->width());
    ASSERT_EQ(got.origins.size(), got.tokens.size());
    for (size_t i = 0; i < got.tokens.size(); ++i) {
      if (got.origins[i] == TokenOrigin::Draft) {
        EXPECT_TRUE(contains(*subset, got.tokens[i])) << got.tokens[i];
        ++drafted;
      }
      if (!contains(*subset, got.tokens[i])) ++outside;
    }
    EXPECT_EQ(full.generate(prompt, go, {}).tokens, want.tokens);
    EXPECT_EQ(full.draft_vocab_width(), draft_->tokenizer->n_vocab());
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(outside, 0);
}

// A reordered head without a subset still drafts in vocabulary ids: the same greedy text.
TEST_F(DraftVocab, ReorderedHeadWithoutSubsetKeepsGreedyText) {
  EngineOptions eo;
  eo.n_ctx = 128;
  eo.n_threads = 1;
  Engine plain(*target_, nullptr, eo);
  Engine spec(*target_, reordered_draft_, eo);
  Engine same_draft(*target_, draft_, eo);
  const std::vector<int32_t> prompt = {70, 71, 72};
  GenerationOptions go;
  go.max_tokens = 20;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  go.draft_max = 3;
  const GenerationResult a = spec.generate(prompt, go, {});
  const GenerationResult b = same_draft.generate(prompt, go, {});
  EXPECT_EQ(a.tokens, plain.generate(prompt, go, {}).tokens);
  // The head order changes nothing about which tokens the draft proposes.
  EXPECT_EQ(a.stats.spec.drafted, b.stats.spec.drafted);
  EXPECT_EQ(a.stats.spec.accepted, b.stats.spec.accepted);
}

TEST_F(DraftVocab, NegativeSizeIsRefused) {
  EngineOptions eo;
  eo.draft_vocab = -1;
  EXPECT_THROW(Engine(*target_, draft_, eo), Error);
}

}  // namespace
}  // namespace specdec
