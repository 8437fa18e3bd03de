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

TEST(TokenMask, EndTokensOnlyWhenCompleteAndNeverByTheirBytes) {
  // Token 11 is an end token whose text is "<end>": the grammar's "<end>" does not make it
  // allowed, and the text's own tokens never stand for the end.
  const auto g = Grammar::parse(R"(root ::= "{" [a]* "}" | "<end>")");
  auto v = std::make_shared<const GrammarVocab>(
      std::vector<std::string>{"{", "a", "}", "<", "end", ">", "<end>", "", "{a}", "a}", "\"",
                               "<end>"},
      std::vector<int32_t>{11, 11});  // listed twice: once is enough
  GrammarMasker m(v);
  EXPECT_TRUE(v->is_end(11));
  EXPECT_FALSE(v->is_end(6));
  EXPECT_FALSE(v->is_end(-1));
  GrammarState s(g);
  std::span<const uint64_t> bits = m.allowed(s);
  EXPECT_TRUE(bit(bits, 0) && bit(bits, 3) && bit(bits, 6) && bit(bits, 8));
  EXPECT_FALSE(bit(bits, 11));  // not complete yet
  EXPECT_FALSE(bit(bits, 7));   // empty bytes: never
  EXPECT_FALSE(m.allows(s, 11));
  EXPECT_FALSE(m.advance(s, 11));
  ASSERT_TRUE(m.advance(s, 8));  // "{a}": three grammar elements in one token
  EXPECT_TRUE(s.complete());
  bits = m.allowed(s);
  for (int32_t t = 0; t < v->n_vocab(); ++t) EXPECT_EQ(bit(bits, t), t == 11) << t;
  const std::string before = s.key();
  EXPECT_TRUE(m.advance(s, 11));
  EXPECT_EQ(s.key(), before);
  // A failed advance leaves the state as it was.
  GrammarState t(g);
  EXPECT_FALSE(m.advance(t, 2));
  EXPECT_FALSE(t.dead());
  EXPECT_TRUE(m.advance(t, 0));
  // A dead state allows nothing, not even the end.
  GrammarState dead(g);
  EXPECT_FALSE(dead.accept("x"));
  for (const uint64_t w : m.allowed(dead)) EXPECT_EQ(w, 0u);
  EXPECT_FALSE(m.allows(dead, 11));
  EXPECT_THROW(GrammarVocab({"a"}, {1}), Error);  // an end token out of range
}

TEST(TokenMask, TokensEndingInsideACharacter) {
  // Only é (C3 A9) and ü (C3 BC) fit: C3 alone is allowed (it may become either), C3 80 is
  // not (no such character fits), and C4 never.
  const auto g = Grammar::parse(R"(root ::= [éü]+)");
  auto v = std::make_shared<const GrammarVocab>(
      std::vector<std::string>{"\xC3", "\xA9", "\xBC", "\xC3\x80", "\xC4", "\xC3\xA9",
                               "\xC3\xA9\xC3", "\xA9\xC3\xBC", "e", "\xA9\xC3\x80"},
      std::vector<int32_t>{});
  GrammarMasker m(v);
  GrammarState s(g);
  auto names = [&](const GrammarState& st) {
    std::vector<int32_t> out;
    const auto bits = m.allowed(st);
    for (int32_t t = 0; t < v->n_vocab(); ++t) {
      EXPECT_EQ(bit(bits, t), m.allows(st, t)) << t;
      if (bit(bits, t)) out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(names(s), (std::vector<int32_t>{0, 5, 6}));
  ASSERT_TRUE(m.advance(s, 6));  // é and half of the next character
  EXPECT_FALSE(s.complete());
  EXPECT_EQ(names(s), (std::vector<int32_t>{1, 2, 7}));
  ASSERT_TRUE(m.advance(s, 7));
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(names(s), (std::vector<int32_t>{0, 5, 6}));
}

TEST(TokenMask, TheCacheIsBoundedAndPerGrammar) {
  const auto g = Grammar::parse(R"(root ::= [a-z]{0,5})");
  GrammarMasker m(vocab(), 2);
  GrammarState s(g);
  std::vector<GrammarState> states = {s};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.advance(s, 2));  // "a": each step is a new state (the count is bounded)
    states.push_back(s);
  }
  for (const GrammarState& st : states) m.allowed(st);
  EXPECT_EQ(m.cache_misses(), 4u);
  m.allowed(states[3]);  // the last one is still there
  EXPECT_EQ(m.cache_hits(), 1u);
  m.allowed(states[0]);  // the first was evicted
  EXPECT_EQ(m.cache_misses(), 5u);
  // A state of another grammar with an equal key gets its own grammar's mask.
  const auto other = Grammar::parse(R"(root ::= [x]{0,5})");
  GrammarState o(other);
  ASSERT_EQ(o.key(), states[0].key());  // the same shape: one stack at the same position
  EXPECT_TRUE(bit(m.allowed(states[0]), 2));
  EXPECT_FALSE(bit(m.allowed(o), 2));
  EXPECT_TRUE(bit(m.allowed(o), 15));
  EXPECT_TRUE(bit(m.allowed(states[0]), 2));
}

TEST(TokenMask, AmbiguityLimitsReachTheCaller) {
  // Each "a" doubles the ways to go on; the walk over a vocabulary of long runs of "a" has to
  // throw (as accept does) rather than track millions of stacks.
  const auto g = Grammar::parse(R"(root ::= x "b"
x ::= "a" x "c" | "a" x "d" | "")");
  std::vector<std::string> tokens;
  for (int n = 1; n <= 20; ++n) tokens.push_back(std::string(static_cast<size_t>(n), 'a'));
  GrammarMasker m(std::make_shared<const GrammarVocab>(tokens, std::vector<int32_t>{}));
  GrammarState s(g);
  EXPECT_THROW(m.allowed(s), Error);
  EXPECT_THROW(m.allows(s, 19), Error);
  EXPECT_TRUE(m.allows(s, 4));  // five "a" are fine
  // The masker still works afterwards.
  GrammarState t(Grammar::parse(R"(root ::= "aa")"));
  const auto bits = m.allowed(t);
  EXPECT_TRUE(bit(bits, 0) && bit(bits, 1) && !bit(bits, 2));
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
