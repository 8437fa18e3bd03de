// Regular expression fuzz target (grammar/regex_gbnf.h). Input: a pattern, then optionally a NUL
// byte and a text to match; without a NUL, the last 16 bytes of the input are the text. The
// pattern is compiled in both modes (plain text and JSON string): it must compile or throw
// specdec::Error, and what it compiles to must be a grammar Grammar::parse accepts (an Error
// there only for the grammar's size bounds). Where PCRE2 reads the pattern the same way (it
// compiles there, and the pattern avoids the spellings the two dialects read differently), the
// grammar must accept exactly the texts PCRE2 matches: the text and each of its prefixes, with
// \r and non-ASCII bytes left out (where ECMAScript's '.' and \s differ from PCRE2's), whole
// and as a search, plain and spelled as a JSON string.
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "fuzz_targets.h"
#include "grammar/grammar.h"
#include "grammar/regex_gbnf.h"
#include "grammar/regex_oracle_test_util.h"

namespace specdec::fuzz {
namespace {

constexpr size_t kMaxPattern = 256;
constexpr size_t kMaxText = 24;
constexpr size_t kTailText = 16;

// Spellings PCRE2 reads otherwise than ECMAScript does: \u escapes (an error there), {,m} (a
// literal in PCRE2 10.42), \v (a class of vertical space there), \Z (before a final newline
// there), \x{...} (a code point there, an error here), \c (PCRE2 takes any character after it).
bool same_in_both(std::string_view p) {
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] == '{' && p[i + 1] == ',') return false;
    if (p[i] == '\\') {
      const char c = p[i + 1];
      if (c == 'u' || c == 'v' || c == 'Z' || c == 'z' || c == 'x' || c == 'c') return false;
      ++i;  // an escaped character is not the start of another escape
    }
  }
  return true;
}

// The grammar of a compiled expression, or null where the grammar's size bounds refuse it.
std::shared_ptr<const Grammar> grammar_of(const std::string& expr, bool json) {
  const std::string gbnf =
      json ? str_cat("root ::= \"\\\"\" ", expr, " \"\\\"\"\n") : str_cat("root ::= ", expr, "\n");
  try {
    return Grammar::parse(gbnf);
  } catch (const Error& e) {
    const std::string_view what = e.what();
    FUZZ_CHECK(what.find("too large") != std::string_view::npos ||
               what.find("over ") != std::string_view::npos);
    return nullptr;
  }
}

// 1 or 0: whether the grammar accepts the whole text; -1 past its ambiguity bounds.
int verdict(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  try {
    GrammarState s(g);
    return s.accept(text) && s.complete() ? 1 : 0;
  } catch (const Error&) {
    return -1;
  }
}

}  // namespace

int fuzz_one_regex(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view pattern = input, text_in;
  if (const size_t nul = input.find('\0'); nul != std::string_view::npos) {
    pattern = input.substr(0, nul);
    text_in = input.substr(nul + 1);
  } else {
    text_in = input.substr(input.size() > kTailText ? input.size() - kTailText : 0);
  }
  if (pattern.size() > kMaxPattern) pattern = pattern.substr(0, kMaxPattern);
  std::string text;
  for (const char c : text_in.substr(0, kMaxText)) {
    if (c != '\r' && static_cast<unsigned char>(c) < 0x80) text += c;
  }

  for (const RegexMatch match : {RegexMatch::kWhole, RegexMatch::kSearch}) {
    std::shared_ptr<const Grammar> plain, json;
    try {
      plain = grammar_of(regex_gbnf(pattern, RegexText::kPlain, match), false);
      json = grammar_of(regex_gbnf(pattern, RegexText::kJsonString, match), true);
    } catch (const Error&) {
      return 0;  // refused (the grammar_of checks above abort on anything else)
    }
    if (plain == nullptr || json == nullptr || !same_in_both(pattern)) continue;
    testing::PcreOracle pcre(pattern);  // (the converter accepted it: valid UTF-8, as PCRE2 needs)
    if (!pcre.ok()) continue;
    for (size_t n = 0; n <= text.size(); ++n) {
      const std::string t = text.substr(0, n);
      const int want = pcre.matches(t, match == RegexMatch::kWhole);
      if (want < 0) continue;
      const int got = verdict(plain, t);
      if (got >= 0) FUZZ_CHECK(got == want);
      const int got_json = verdict(json, str_cat("\"", testing::json_string_body(t), "\""));
      if (got_json >= 0) FUZZ_CHECK(got_json == want);
    }
  }
  return 0;
}

}  // namespace specdec::fuzz
