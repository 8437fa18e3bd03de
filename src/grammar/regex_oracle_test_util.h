// Test-only helpers shared by the regex grammar's tests and its fuzz target: PCRE2 as the oracle
// a pattern's grammar is checked against, and the JSON string body the JSON-string grammars
// write for a text.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace specdec::testing {

// PCRE2 with UTF, $ only at the very end. On texts without \r, U+2028/2029 and non-ASCII
// spaces or digits, its meaning of . \d \w \s is ECMAScript's.
class PcreOracle {
 public:
  explicit PcreOracle(std::string_view pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, nullptr);
    if (code_ != nullptr) data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~PcreOracle() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  PcreOracle(const PcreOracle&) = delete;
  PcreOracle& operator=(const PcreOracle&) = delete;

  bool ok() const { return code_ != nullptr && data_ != nullptr; }
  // 1 or 0: whether the pattern matches the whole text (whole) or somewhere in it; -1: PCRE2
  // gave up (its backtracking limits).
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

// The JSON string body the grammars write for `text`: '"', '\' and the controls JSON has short
// escapes for escaped that way, the other controls and DEL as \u00XX, the rest as it is.
inline std::string json_string_body(std::string_view text) {
  std::string out;
  for (const uint32_t cp : lenient_codepoints(text)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || cp == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
      continue;
    }
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace specdec::testing
