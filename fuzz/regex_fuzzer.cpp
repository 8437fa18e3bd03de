// Regular expression fuzz target (grammar/regex_gbnf.h). Input: a pattern, then optionally a NUL
// byte and a text to match; without a NUL, the last 16 bytes of the input are the text. The
// pattern is compiled in both modes (plain text and JSON string): it must compile or throw
// specdec::Error, and what it compiles to must be a grammar Grammar::parse accepts (an Error
// there only for the grammar's size bounds). Where PCRE2 reads the pattern the same way (it
// compiles there, and the pattern avoids the spellings the two dialects read differently), the
// grammar must accept exactly the texts PCRE2 matches: the text and each of its prefixes, with
// \r and non-ASCII bytes left out (where ECMAScript's '.' and \s differ from PCRE2's), whole
// and as a search, plain and spelled as a JSON string.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "fuzz_targets.h"
#include "grammar/grammar.h"
#include "grammar/regex_gbnf.h"

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

class Pcre {
 public:
  explicit Pcre(std::string_view pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, nullptr);
    if (code_ != nullptr) data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  Pcre(const Pcre&) = delete;
  Pcre& operator=(const Pcre&) = delete;
  bool ok() const { return code_ != nullptr && data_ != nullptr; }
  // 1 or 0: whether it matches; -1: PCRE2 gave up (its backtracking limits).
  int matches(std::string_view text, bool whole) {
    const uint32_t opts = whole ? PCRE2_ANCHORED | PCRE2_ENDANCHORED : 0;
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                               opts, data_, nullptr);
    if (rc >= 0) return 1;
    return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

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

// The JSON string body the grammars write for an ASCII text: the short escapes where JSON has
// them, \u00XX for the other controls and DEL.
std::string json_body(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const char* short_escape = c == '"'    ? "\\\""
                               : c == '\\' ? "\\\\"
                               : c == '\b' ? "\\b"
                               : c == '\f' ? "\\f"
                               : c == '\n' ? "\\n"
                               : c == '\r' ? "\\r"
                               : c == '\t' ? "\\t"
                                           : nullptr;
    if (short_escape != nullptr) {
      out += short_escape;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
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
    Pcre pcre(pattern);  // (the converter accepted it: valid UTF-8, as PCRE2 needs)
    if (!pcre.ok()) continue;
    for (size_t n = 0; n <= text.size(); ++n) {
      const std::string t = text.substr(0, n);
      const int want = pcre.matches(t, match == RegexMatch::kWhole);
      if (want < 0) continue;
      const int got = verdict(plain, t);
      if (got >= 0) FUZZ_CHECK(got == want);
      const int got_json = verdict(json, str_cat("\"", json_body(t), "\""));
      if (got_json >= 0) FUZZ_CHECK(got_json == want);
    }
  }
  return 0;
}

}  // namespace specdec::fuzz
