#include "engine/token_ranking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/loaded_model.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

LoadedModel tiny(int n_vocab, const std::string& name) {
  testing::TinyModelSpec s;
  s.n_vocab = n_vocab;
  return LoadedModel::load(testing::write_tiny_model(s, testing::temp_path(name)));
}

// The fingerprint depends on the token strings only: the same vocabulary in two files agrees,
// one more token does not.
TEST(TokenRanking, FingerprintIdentifiesTheVocabulary) {
  const LoadedModel a = tiny(300, "tr_a.gguf"), b = tiny(300, "tr_b.gguf");
  const LoadedModel c = tiny(301, "tr_c.gguf");
  EXPECT_EQ(vocab_fingerprint(*a.tokenizer), vocab_fingerprint(*b.tokenizer));
  EXPECT_NE(vocab_fingerprint(*a.tokenizer), vocab_fingerprint(*c.tokenizer));
}

// No corpus count ships for a tiny vocabulary: every id once, in merge (id) order.
TEST(TokenRanking, UnknownBpeVocabularyIsRankedByMergeOrder) {
  const LoadedModel m = tiny(300, "tr_d.gguf");
  const TokenRanking r = rank_tokens(*m.tokenizer);
  EXPECT_EQ(r.counted, 0);
  std::vector<int32_t> ids(300);
  std::iota(ids.begin(), ids.end(), 0);
  EXPECT_EQ(r.ids, ids);
}

}  // namespace
}  // namespace specdec
