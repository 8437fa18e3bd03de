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
    const std::string target_path =
        testing::write_tiny_model(t, testing::temp_path("dv_target.gguf"));
    target_ = new LoadedModel(LoadedModel::load(target_path));
    testing::TinyModelSpec d;
    d.seed = 2;
    d.n_layer = 1;
    const std::string path = testing::write_tiny_model(d, testing::temp_path("dv_draft.gguf"));
    draft_ = new LoadedModel(LoadedModel::load(path));
    ModelLoadOptions reordered;
    reordered.output_ids = reversed_ids(draft_->tokenizer->n_vocab());
    reordered_draft_ = new LoadedModel(LoadedModel::load(path, reordered));
    // The target's own weights as a draft: it proposes the target's greedy token whenever its
    // subset holds it, so what the subset lacks is all that rejects its drafts.
    reordered_target_ = new LoadedModel(LoadedModel::load(target_path, reordered));
  }
  static void TearDownTestSuite() {
    delete reordered_target_;
    delete reordered_draft_;
    delete draft_;
    delete target_;
  }
  static LoadedModel* target_;
  static LoadedModel* draft_;
  static LoadedModel* reordered_draft_;
  static LoadedModel* reordered_target_;
};
LoadedModel* DraftVocab::target_ = nullptr;
LoadedModel* DraftVocab::draft_ = nullptr;
LoadedModel* DraftVocab::reordered_draft_ = nullptr;
LoadedModel* DraftVocab::reordered_target_ = nullptr;

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

// The growing subset starts as the prompt's; adding tokens it holds changes nothing, adding one
// it lacks brings in that token's group of 8 and keeps everything it had; ids the head lacks
// are ignored.
TEST_F(DraftVocab, GrowingSubsetStartsAsThePromptsAndAddsWhatTheAnswerUses) {
  const Tokenizer& tok = *draft_->tokenizer;
  const int32_t v = tok.n_vocab();
  const std::vector<int32_t> head = reversed_ids(v);
  const std::vector<int32_t> prompt = {3, 4, 100};
  const auto start = draft_vocab_for_prompt(tok, head, v, 20, prompt);
  GrowingDraftVocab g(tok, head, v, 20, prompt);
  ASSERT_TRUE(start.has_value());
  ASSERT_TRUE(g.subset().has_value());
  EXPECT_EQ(g.subset()->ids(), start->ids());
  EXPECT_EQ(g.subset()->ranges(), start->ranges());

  const std::vector<int32_t> held = {3, 100, head[0], -1, v, v + 7};
  EXPECT_FALSE(g.add(held));
  EXPECT_EQ(g.subset()->ids(), start->ids());
  EXPECT_FALSE(g.add({}));

  ASSERT_FALSE(contains(*start, 150));
  const std::vector<int32_t> answer = {150, 3};
  EXPECT_TRUE(g.add(answer));
  ASSERT_TRUE(g.subset().has_value());
  EXPECT_TRUE(contains(*g.subset(), 150));
  for (int32_t id : start->ids()) EXPECT_TRUE(contains(*g.subset(), id)) << id;
  EXPECT_EQ(g.subset()->width(), start->width() + 8);  // row v - 1 - 150's group, whole
  EXPECT_FALSE(g.add(answer));                         // now held
}

TEST_F(DraftVocab, GrowingSubsetThatCoversTheHeadBecomesTheWholeHead) {
  const Tokenizer& tok = *draft_->tokenizer;
  const int32_t v = tok.n_vocab();
  const std::vector<int32_t> prompt = {3};
  GrowingDraftVocab g(tok, {}, v, 20, prompt);
  ASSERT_TRUE(g.subset().has_value());
  std::vector<int32_t> all(static_cast<size_t>(v));
  for (int32_t id = 0; id < v; ++id) all[static_cast<size_t>(id)] = id;
  EXPECT_TRUE(g.add(all));
  EXPECT_FALSE(g.subset().has_value());
  EXPECT_FALSE(g.add(all));  // the whole head stays the whole head

  GrowingDraftVocab off(tok, {}, v, 0, prompt);  // no subset asked for: nothing to grow
  EXPECT_FALSE(off.subset().has_value());
  EXPECT_FALSE(off.add(all));
}

// End to end through the engine, with the draft's head in another order (the target's weights,
// so that only its subset keeps it from proposing the target's token): a draft that scores 40
// rows plus the prompt's tokens, then the answer's own, changes the speed, never the greedy
// text. Every accepted draft is a token of the prompt's subset or of one the answer used before
// it; some tokens outside the prompt's subset were produced, so the truncation mattered, and some
// of them were later drafted and accepted, so the growth did.
TEST_F(DraftVocab, EngineWithTruncatedDraftKeepsGreedyTextAndDraftsOnlySubsetTokens) {
  EngineOptions eo;
  eo.n_ctx = 128;
  eo.n_threads = 2;
  Engine plain(*target_, nullptr, eo);
  EngineOptions sub = eo;
  sub.draft_vocab = 40;
  Engine spec(*target_, reordered_target_, sub);
  Engine full(*target_, draft_, eo);
  int64_t drafted = 0, outside = 0, drafted_grown = 0;
  for (int p = 0; p < 6; ++p) {
    const std::vector<int32_t> prompt = {65 + p, 66, 10 + 3 * p, 67};
    const auto subset = draft_vocab_for_prompt(
        *draft_->tokenizer, reordered_target_->model->logit_ids(), 300, 40, prompt);
    ASSERT_TRUE(subset.has_value());
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.draft_max = 4;
    const GenerationResult want = plain.generate(prompt, go, {});
    const GenerationResult got = spec.generate(prompt, go, {});
    ASSERT_EQ(got.tokens, want.tokens) << "prompt " << p;
    // Every answer token was added after the round that produced it.
    GrowingDraftVocab grown(*draft_->tokenizer, reordered_target_->model->logit_ids(), 300, 40,
                            prompt);
    grown.add(got.tokens);
    EXPECT_EQ(spec.draft_vocab_width(), grown.subset() ? grown.subset()->width() : 300);
    // A drafted token must be in the subset grown by the answer's earlier tokens at most (the
    // engine adds a round's tokens after it; each addition brings in its group of 8).
    GrowingDraftVocab before(*draft_->tokenizer, reordered_target_->model->logit_ids(), 300, 40,
                             prompt);
    ASSERT_EQ(got.origins.size(), got.tokens.size());
    for (size_t i = 0; i < got.tokens.size(); ++i) {
      const int32_t t = got.tokens[i];
      if (got.origins[i] == TokenOrigin::Draft) {
        EXPECT_TRUE(!before.subset() || contains(*before.subset(), t)) << t;
        ++drafted;
        if (!contains(*subset, t)) ++drafted_grown;
      }
      if (!contains(*subset, t)) ++outside;
      before.add(std::span<const int32_t>(&got.tokens[i], 1));
    }
    EXPECT_EQ(full.generate(prompt, go, {}).tokens, want.tokens);
    EXPECT_EQ(full.draft_vocab_width(), draft_->tokenizer->n_vocab());
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(outside, 0);
  EXPECT_GT(drafted_grown, 0);
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
