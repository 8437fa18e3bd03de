#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace specdec::unicode {

size_t lead_byte_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
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
