#include "grammar/gbnf_text.h"

#include "common/utf8.h"

namespace specdec {

std::string gbnf_char(uint32_t cp) {
  constexpr char kHex[] = "0123456789abcdef";
  if (cp == '"' || cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^') {
    return std::string{'\\', static_cast<char>(cp)};
  }
  if (cp < 0x20 || cp == 0x7F) return std::string{'\\', 'x', kHex[cp >> 4], kHex[cp & 15]};
  std::string out;
  append_utf8(out, cp);
  return out;
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (const uint32_t cp : lenient_codepoints(text)) {
    // Inside a literal only '"' and '\' need escaping; keep '[' '-' '^' ']' readable.
    out += (cp == '[' || cp == ']' || cp == '-' || cp == '^')
               ? std::string(1, static_cast<char>(cp))
               : gbnf_char(cp);
  }
  return out + "\"";
}

}  // namespace specdec
