#include "grammar/regex_gbnf.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/regex_oracle_test_util.h"

namespace specdec {
namespace {

using testing::json_string_body;
using Pcre = testing::PcreOracle;

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

// Every text of up to `max_len` characters over `alphabet` (UTF-8 pieces).
std::vector<std::string> all_texts(const std::vector<std::string>& alphabet, int max_len) {
  std::vector<std::string> out{""};
  size_t from = 0;
  for (int len = 1; len <= max_len; ++len) {
    const size_t to = out.size();
    for (size_t i = from; i < to; ++i) {
      for (const std::string& a : alphabet) out.push_back(out[i] + a);
    }
    from = to;
  }
  return out;
}

struct Case {
  const char* pattern;
  std::vector<std::string> alphabet;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"abc", {"a", "b", "c"}},
      {"a|b|cd", {"a", "b", "c", "d"}},
      {"a*", {"a", "b"}},
      {"a+b?", {"a", "b"}},
      {"(ab)*", {"a", "b"}},
      {"(a|b)*c", {"a", "b", "c"}},
      {"[a-c]+", {"a", "c", "d", "-"}},
      {"[^a]b", {"a", "b", "\"", "\\", "\n", "é"}},
      {"a{2}", {"a"}},
      {"a{1,3}", {"a", "b"}},
      {"a{2,}", {"a", "b"}},
      {"x{1,2}?y", {"x", "y"}},
      {"\\d+", {"1", "9", "a", " "}},
      {"\\w\\s\\W", {"a", "_", " ", "\t", "-", "é"}},
      {"\\D\\S", {"1", "a", " ", "é"}},
      {".a.", {"a", "\n", "é", "\""}},
      {"(a*)*", {"a", "b"}},
      {"(a?b?)*c", {"a", "b", "c"}},
      {"(a|)+b", {"a", "b"}},
      {"((a*)?b*)+", {"a", "b", "c"}},
      {"(a*|b?)*c*", {"a", "b", "c"}},
      {"(a{0,2}b?){2,3}", {"a", "b"}},
      {"^ab$", {"a", "b"}},
      {"^a|b$", {"a", "b", "c"}},
      {"^a", {"a", "b"}},
      {"b$", {"a", "b"}},
      {"a\\.b", {"a", ".", "b"}},
      {"[.-]", {".", "-", "a"}},
      {"[\\]a]", {"]", "a", "b"}},
      {"a{", {"a", "{"}},
      {"(?:ab)+", {"a", "b"}},
      {"(?<n>a)b", {"a", "b"}},
      {"[\\d\\s]x", {"1", " ", "x", "a"}},
      {"[a-]", {"a", "-", "b"}},
      {"é+[^é]", {"é", "e", "\\"}},
      {"(a|b){2,3}", {"a", "b", "c"}},
      {"\\\\\"", {"\\", "\"", "a"}},
      {"a\\nb", {"a", "\n", "b"}},
      {"[\\x00-\\x1f]+", {"\n", "\t", std::string(1, '\x01'), "a"}},
      {"[^\\n]*", {"\n", "\x7f", "a", "\""}},
      {"[^b-y]", {"a", "b", "z", "\x01", "\""}},
  };
  return c;
}

TEST(RegexGbnf, TheLanguageIsPcre2sOnEveryShortText) {
  for (const bool whole : {true, false}) {
    for (const Case& c : cases()) {
      const RegexMatch match = whole ? RegexMatch::kWhole : RegexMatch::kSearch;
      Pcre pcre(c.pattern);
      ASSERT_TRUE(pcre.ok()) << c.pattern;
      std::string plain_expr, json_expr;
      ASSERT_NO_THROW(plain_expr = regex_gbnf(c.pattern, RegexText::kPlain, match)) << c.pattern;
      ASSERT_NO_THROW(json_expr = regex_gbnf(c.pattern, RegexText::kJsonString, match))
          << c.pattern;
      std::shared_ptr<const Grammar> plain, json;
      ASSERT_NO_THROW(plain = Grammar::parse("root ::= " + plain_expr + "\n")) << c.pattern << "\n"
                                                                               << plain_expr;
      ASSERT_NO_THROW(json = Grammar::parse("root ::= \"\\\"\" " + json_expr + " \"\\\"\"\n"))
          << c.pattern << "\n"
          << json_expr;
      int matched = 0;
      for (const std::string& t : all_texts(c.alphabet, 4)) {
        // kWhole ignores where the pattern anchors; PCRE2 is asked for a whole match then.
        const bool want = pcre.matches(t, whole) == 1;
        matched += want;
        ASSERT_EQ(accepts(plain, t), want)
            << "pattern " << c.pattern << (whole ? " (whole)" : " (search)") << " text '" << t
            << "'\n"
            << plain_expr;
        ASSERT_EQ(accepts(json, str_cat("\"", json_string_body(t), "\"")), want)
            << "pattern " << c.pattern << " as JSON" << (whole ? " (whole)" : " (search)")
            << " text '" << t << "'\n"
            << json_expr;
      }
      EXPECT_GT(matched, 0) << c.pattern << ": a case that tests nothing";
    }
  }
}

TEST(RegexGbnf, LongerRandomTextsAgreeWithPcre2) {
  std::mt19937 rng(5);
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"[a-z]+@[a-z]+\\.(com|org)", "abz@.comrg"},
      {"\\d{3}-\\d{4}", "0129-"},
      {"(\\w+\\s?)+!", "ab _!"},
      {"[A-F0-9]{2}(:[A-F0-9]{2}){2}", "0AF9:g"},
  };
  for (const auto& [pattern, letters] : cases) {
    Pcre pcre(pattern);
    const auto g = Grammar::parse(
        str_cat("root ::= ", regex_gbnf(pattern, RegexText::kPlain, RegexMatch::kWhole), "\n"));
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string t;
      const int len = static_cast<int>(rng() % 16);
      for (int k = 0; k < len; ++k) t += letters[rng() % letters.size()];
      const bool want = pcre.matches(t, true) == 1;
      matched += want;
      ASSERT_EQ(accepts(g, t), want) << pattern << " text '" << t << "'";
    }
    // A known match too, since random texts may rarely hit one.
    for (const char* t : {"ab@cd.com", "012-3456", "ab cd!", "0A:F9:00"}) {
      if (pcre.matches(t, true) == 1) {
        ++matched;
        EXPECT_TRUE(accepts(g, t)) << pattern << " " << t;
      }
    }
    EXPECT_GT(matched, 0) << pattern;
  }
}

bool whole_match(const char* pattern, const std::string& text) {
  return accepts(
      Grammar::parse(
          str_cat("root ::= ", regex_gbnf(pattern, RegexText::kPlain, RegexMatch::kWhole), "\n")),
      text);
}

TEST(RegexGbnf, EcmaScriptSpellingsPcre2DoesNotRead) {
  EXPECT_TRUE(whole_match("\\u0061\\x62\\u{63}", "abc"));
  EXPECT_TRUE(whole_match("\\u00e9", "é"));
  EXPECT_TRUE(whole_match("\\uD83D\\uDE00", "\xF0\x9F\x98\x80"));  // a surrogate pair: one emoji
  EXPECT_TRUE(whole_match("\\u{1F600}", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(whole_match("a{,2}", ""));
  EXPECT_TRUE(whole_match("a{,2}", "aa"));
  EXPECT_FALSE(whole_match("a{,2}", "aaa"));
  EXPECT_TRUE(whole_match("(?P<x>a)", "a"));
  EXPECT_TRUE(whole_match("\\cJ", "\n"));
  EXPECT_TRUE(whole_match("[\\b]", "\b"));
  EXPECT_TRUE(whole_match("\\Aab\\Z", "ab"));
  EXPECT_TRUE(whole_match("a\\/b\\-", "a/b-"));
  // ECMAScript's '.' leaves out every line terminator, \s holds Unicode's spaces.
  EXPECT_FALSE(whole_match(".", "\r"));
  EXPECT_FALSE(whole_match(".", "\xE2\x80\xA8"));   // U+2028
  EXPECT_TRUE(whole_match("\\s", "\xE3\x80\x80"));  // U+3000
  EXPECT_FALSE(whole_match("\\S", "\xC2\xA0"));     // U+00A0
  // Lazy quantifiers match the same texts.
  EXPECT_TRUE(whole_match("a+?b*?c??", "aab"));
}

std::string error_of(const char* pattern) {
  try {
    regex_gbnf(pattern, RegexText::kPlain, RegexMatch::kWhole);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RegexGbnf, WhatItCannotCompileIsAnErrorNamingWhere) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"(a)\\1", "character 3: backreferences"},
      {"(?<x>a)\\k<x>", "backreferences"},
      {"a(?=b)", "character 1: lookaround"},
      {"a(?<!b)", "lookaround"},
      {"\\bword", "character 0: word boundaries"},
      {"a++", "possessive"},
      {"a**", "nothing to repeat"},
      {"*a", "character 0: nothing to repeat"},
      {"a|?", "nothing to repeat"},
      {"(?i)a", "inline flags"},
      {"\\p{L}", "Unicode property"},
      {"a^b", "character 1: an anchor (^)"},
      {"a$b", "an anchor ($)"},
      {"(^a)", "an anchor (^)"},
      {"(a", "character 0: unclosed '('"},
      {"a)", "character 1: unmatched ')'"},
      {"[ab", "unclosed '['"},
      {"[]", "empty class"},
      {"[z-a]", "out of order"},
      {"[\\d-z]", "single characters"},
      {"a{3,2}", "m below n"},
      {"a{10001}", "over 10000"},
      {"\\", "cannot end with"},
      {"\\q", "unknown escape \\q"},
      {"\\x4", "hex digits"},
      {"\\uD800", "lone surrogate"},
      {"\\u{110000}", "code point"},
      {"\\07", "octal"},
      {"[^\\s\\S]", "matches nothing"},
      {"[[:alpha:]]", "POSIX"},
      {"a\xF6\xA4\xA3\xA2", "not valid UTF-8 (at byte 1)"},  // beyond U+10FFFF
      {"\xED\xA0\x80", "not valid UTF-8"},                   // a surrogate
      {"\xC3", "ends inside a character"},
  };
  for (const auto& [pattern, want] : bad) {
    const std::string got = error_of(pattern);
    EXPECT_NE(got.find(want), std::string::npos) << pattern << " -> " << got;
    if (std::string_view(want).find("character") == std::string_view::npos) {
      EXPECT_NE(got.find("regex"), std::string::npos) << pattern << " -> " << got;
    }
  }
}

TEST(RegexGbnf, HostilePatternsAreBounded) {
  EXPECT_NE(error_of(std::string(70, '(').append("a").append(70, ')').c_str()).find("deeper"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(17 << 10, 'a').c_str()).find("longer than"), std::string::npos);
  // Nested repetitions of empty-capable groups: rewritten, never left-recursive.
  const char* nested = "((((a*)*b?)*c?)*)*";
  std::string expr;
  ASSERT_NO_THROW(expr = regex_gbnf(nested, RegexText::kPlain, RegexMatch::kWhole));
  EXPECT_NO_THROW(Grammar::parse("root ::= " + expr + "\n")) << expr;
  EXPECT_TRUE(whole_match(nested, "abcabba"));
  // Nested bounds multiply, but the grammar repeats references to rules, not copies of text:
  // a billion characters' worth stays small.
  std::string big;
  ASSERT_NO_THROW(big =
                      regex_gbnf("((a{1000}){1000}){1000}", RegexText::kPlain, RegexMatch::kWhole));
  EXPECT_LT(big.size(), 100u);
  std::shared_ptr<const Grammar> g;
  ASSERT_NO_THROW(g = Grammar::parse("root ::= " + big + "\n"));
  GrammarState s(g);
  EXPECT_TRUE(s.accept(std::string(5000, 'a')));
  EXPECT_FALSE(s.complete());
}

TEST(RegexGbnf, JsonStringsSpellCharactersAsJsonDoes) {
  const auto g = [](const char* pattern) {
    return Grammar::parse(str_cat("root ::= \"\\\"\" ",
                                  regex_gbnf(pattern, RegexText::kJsonString, RegexMatch::kWhole),
                                  " \"\\\"\"\n"));
  };
  EXPECT_TRUE(accepts(g("a\"b"), R"("a\"b")"));
  EXPECT_FALSE(accepts(g("a\"b"), R"("a"b")"));
  EXPECT_TRUE(accepts(g("\\n"), R"("\n")"));
  EXPECT_FALSE(accepts(g("\\n"), "\"\n\""));  // a raw newline is not JSON
  EXPECT_TRUE(accepts(g(".*"), R"("x\"y\\z\t\u0001")"));
  EXPECT_TRUE(accepts(g("[\\s\\S]"), R"("\u001f")"));
  EXPECT_TRUE(accepts(g("[\\s\\S]"), R"("\b")"));
  EXPECT_TRUE(accepts(g("\\x7f"), R"("\u007f")"));
  EXPECT_FALSE(accepts(g("\\x7f"), "\"\x7f\""));
}

}  // namespace
}  // namespace specdec
