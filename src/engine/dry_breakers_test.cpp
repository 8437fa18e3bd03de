#include "engine/dry_breakers.h"

#include <gtest/gtest.h>

namespace specdec {
namespace {

// Byte-level BPE: <|im_end|> (control), then "a", ":", "\n" (GPT-2's Ċ), "a:" and ":\n".
Tokenizer small_vocab() {
  VocabData d;
  d.tokens = {"<|im_end|>", "a", ":", "Ċ", "a:", ":Ċ"};
  d.token_types = {kTokenControl, kTokenNormal, kTokenNormal,
                   kTokenNormal,  kTokenNormal, kTokenNormal};
  d.merges = {"a :", ": Ċ"};
  d.eos = 0;
  return Tokenizer::from_vocab(d);
}

TEST(DryBreakers, AreTheVocabularysTokensThatHoldOrBeginABreaker) {
  const Tokenizer tok = small_vocab();
  const std::vector<std::string> texts = dry_token_texts(tok);
  EXPECT_EQ(texts[0], "<|im_end|>");  // a control token's text is spelled out
  EXPECT_EQ(texts[5], ":\n");
  // ":" is in ":", "a:" and ":\n".
  EXPECT_EQ(vocabulary_dry_breakers(tok, texts, {":"}),
            (std::vector<DryBreaker>{{2, {}}, {4, {}}, {5, {}}}));
  // ":\n" whole in token 5; "a:" and ":" end with its first byte and need "\n" (token 3) next.
  EXPECT_EQ(vocabulary_dry_breakers(tok, texts, {":\n"}),
            (std::vector<DryBreaker>{{2, {3}}, {4, {3}}, {5, {}}}));
  // The control token's text takes part: "|" only occurs there.
  EXPECT_EQ(vocabulary_dry_breakers(tok, texts, {"|"}), (std::vector<DryBreaker>{{0, {}}}));
}

TEST(DryBreakers, TheCacheKeepsEachListAndForgetsPastSixteen) {
  DryBreakerCache cache(small_vocab());
  const auto a = cache.get({":"});
  EXPECT_EQ(cache.get({":"}), a);  // the same object: not computed again
  EXPECT_NE(cache.get({"a"}), a);
  EXPECT_EQ(*cache.get({":"}), *a);
  for (int i = 0; i < 20; ++i) cache.get({std::string(1, static_cast<char>('b' + i))});
  const auto again = cache.get({":"});
  EXPECT_EQ(*again, *a);  // recomputed after the cache was emptied, the same breakers
}

}  // namespace
}  // namespace specdec
