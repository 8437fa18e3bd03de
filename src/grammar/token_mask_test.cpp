#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/error.h"

namespace specdec {
namespace {

bool bit(std::span<const uint64_t> bits, int32_t t) {
  return ((bits[static_cast<size_t>(t) / 64] >> (t % 64)) & 1) != 0;
}

// Tokens across several grammar elements, split UTF-8 ("\xC3" + "\xA9" is "é"), an empty
// (control) token and an end token.
std::shared_ptr<const GrammarVocab> vocab() {
  return std::make_shared<const GrammarVocab>(
      std::vector<std::string>{"{", "\"", "a", "ab", "\":", " ", "1", "12", "}", "\"a\": 1}", "",
                               "<end>", "\xC3", "\xA9", "\xC3\xA9", "x", "{\"", "\n"},
      std::vector<int32_t>{11});
}

TEST(TokenMask, TheMaskIsWhatTheTokensBytesAllow) {
  const auto g = Grammar::parse(R"(root ::= "{" "\"" [aé]+ "\": " [0-9]+ "}")");
  GrammarMasker m(vocab());
  GrammarState s(g);
  const auto allowed_names = [&](const GrammarState& st) {
    std::vector<int32_t> out;
    const auto bits = m.allowed(st);
    for (int32_t t = 0; t < m.vocab().n_vocab(); ++t) {
      if (bit(bits, t)) out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{0, 16}));  // "{" and "{\""
  ASSERT_TRUE(m.advance(s, 16));
  // Inside the key: a, ab? no ("b" is not allowed), "\xC3" (starts é), "é"; "\"a\": 1}" no
  // (the key needs a character first).
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{2, 12, 14}));
  ASSERT_TRUE(m.advance(s, 12));
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{13}));  // only the continuation byte
  ASSERT_TRUE(m.advance(s, 13));
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{1, 2, 4, 12, 14}));  // "\"" too: a prefix
  ASSERT_TRUE(m.advance(s, 4));
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{5}));
  ASSERT_TRUE(m.advance(s, 5));
  ASSERT_TRUE(m.advance(s, 7));
  EXPECT_FALSE(s.complete());
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{6, 7, 8}));
  ASSERT_TRUE(m.advance(s, 8));
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(allowed_names(s), (std::vector<int32_t>{11}));  // only the end token
  EXPECT_TRUE(m.advance(s, 11));                            // which changes nothing
  EXPECT_TRUE(s.complete());
  // The empty token is never allowed, not even where anything may come.
  GrammarState any(Grammar::parse("root ::= .*"));
  EXPECT_FALSE(m.allows(any, 10));
  EXPECT_FALSE(bit(m.allowed(any), 10));
  EXPECT_THROW(m.allows(any, 99), Error);
}

TEST(TokenMask, StatesThatComeBackHitTheCache) {
  const auto g = Grammar::parse(R"(root ::= "\"" [a-z]* "\"")");
  GrammarMasker m(vocab());
  GrammarState s(g);
  ASSERT_TRUE(s.accept("\""));
  m.allowed(s);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(m.advance(s, 2));
    m.allowed(s);
  }
  EXPECT_EQ(m.cache_misses(), 1u);
  EXPECT_EQ(m.cache_hits(), 5u);
}

// For random states of a JSON grammar, the trie walk and the one-token check agree on every
// token of a vocabulary of random byte strings.
TEST(TokenMask, TheTrieWalkAgreesWithCheckingEachToken) {
  const auto g = Grammar::parse(R"(
root   ::= object
value  ::= object | array | string | number | "true" | "null"
object ::= "{" ws ( string ":" ws value ws ("," ws string ":" ws value ws)* )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\nt] )* "\""
number ::= "-"? [0-9]+
ws     ::= | " "
)");
  std::mt19937 gen(3);
  const std::string alphabet = "{}[]\":, -0123456789abnt\\\xC3\xA9\xE2\x82\xAC";
  std::vector<std::string> tokens;
  for (char c : alphabet) tokens.emplace_back(1, c);
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    for (size_t n = 1 + gen() % 5; n > 0; --n) t += alphabet[gen() % alphabet.size()];
    tokens.push_back(t);
  }
  tokens.push_back("");
  auto v = std::make_shared<const GrammarVocab>(tokens, std::vector<int32_t>{});
  GrammarMasker m(v);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    GrammarState s(g);
    // A random walk through allowed tokens.
    for (int step = 0; step < 12; ++step) {
      const auto bits = m.allowed(s);
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < v->n_vocab(); ++t) {
        ASSERT_EQ(bit(bits, t), m.allows(s, t))
            << "token '" << tokens[static_cast<size_t>(t)] << "'";
        if (bit(bits, t)) ok.push_back(t);
      }
      ++checked;
      if (ok.empty()) break;
      ASSERT_TRUE(m.advance(s, ok[gen() % ok.size()]));
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace specdec
