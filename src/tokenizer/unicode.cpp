#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace specdec::unicode {

size_t lead_byte_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<uint32_t> lenient_codepoints(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      cps.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      cps.push_back(((b & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      cps.push_back(((b & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      cps.push_back(((b & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                    (s[i + 3] & 0x3Fu));
      i += 4;
    } else {
      cps.push_back(0xFFFD);
      i += 1;
    }
  }
  return cps;
}

namespace {

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  ByteMap() {
    // Printable bytes keep their value; the remaining 68 are shifted to U+0100.. in byte order.
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? b : next++;
      append_utf8(to_utf8[b], to_cp[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return byte_map().to_cp[byte]; }

const std::string& byte_to_utf8(uint8_t byte) { return byte_map().to_utf8[byte]; }

int codepoint_to_byte(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) {
    return static_cast<int>(cp);
  }
  if (cp >= 256 && cp < 256 + 68) {
    const auto& m = byte_map().to_cp;
    for (int b = 0; b < 256; ++b) {
      if (m[b] == cp) return b;
    }
  }
  return -1;
}

namespace {

struct ClassRun {
  uint32_t first;  // the run lasts until the next run's first code point
  uint8_t cls;     // CharClass
};

constexpr ClassRun kClassRuns[] = {
#include "tokenizer/unicode_classes.inc"
};

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp > 0x10FFFF) return CharClass::Other;
  const auto* it = std::upper_bound(std::begin(kClassRuns), std::end(kClassRuns), cp,
                                    [](uint32_t v, const ClassRun& r) { return v < r.first; });
  return static_cast<CharClass>(std::prev(it)->cls);  // kClassRuns[0].first is 0
}

bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

SeqStatus classify_utf8(std::string_view str, size_t& len) {
  const auto* s = reinterpret_cast<const uint8_t*>(str.data());
  const size_t n = str.size();
  const uint8_t b0 = s[0];
  len = 1;
  if (b0 < 0x80) return SeqStatus::Complete;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (rules out overlongs etc.)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return SeqStatus::Invalid;
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= n) {
      len = k;
      return SeqStatus::Incomplete;
    }
    const uint8_t lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
    if (s[k] < lo_k || s[k] > hi_k) {
      len = k;  // maximal subpart: the bytes before the offending one
      return SeqStatus::Invalid;
    }
  }
  len = need;
  return SeqStatus::Complete;
}

}  // namespace specdec::unicode
