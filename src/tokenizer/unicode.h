// Small UTF-8 and GPT-2 byte-mapping helpers used by the tokenizers. Decoding deliberately
// follows llama.cpp's lenient rules (no overlong/surrogate checks) where it affects token ids,
// and strict rules (utf8_valid_prefix) where it affects text shown to users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace specdec::unicode {

// Length of the UTF-8 sequence announced by a lead byte, from its high nibble as llama.cpp does
// (continuation and invalid bytes count as 1). Used to split text into merge symbols.
size_t lead_byte_len(uint8_t lead);

// common/utf8.h's encoder and lenient decoder, under the names the tokenizers use.
using specdec::append_utf8;
using specdec::lenient_codepoints;

// GPT-2's reversible byte <-> printable code point mapping (bytes that are printable Latin-1
// map to themselves, the rest to U+0100 onwards).
uint32_t byte_to_codepoint(uint8_t byte);
// Returns -1 if `cp` is not the image of any byte.
int codepoint_to_byte(uint32_t cp);
// UTF-8 of byte_to_codepoint(byte), cached.
const std::string& byte_to_utf8(uint8_t byte);

// Strict UTF-8 validation of one sequence at `s[0..]`.
enum class SeqStatus { Complete, Incomplete, Invalid };
// Classifies the sequence starting at s[0]. Complete: `len` is its length. Invalid: `len` is the
// length of the maximal ill-formed subpart (>= 1) to replace with one U+FFFD. Incomplete: the
// bytes so far are a valid prefix but the string ends before the sequence does.
SeqStatus classify_utf8(std::string_view s, size_t& len);

// The class a code point has in llama.cpp's Unicode tables (its src/unicode-data.cpp, copied by
// scripts/oracle/gen_unicode_classes.py), as far as pre-tokenizer regexes ask: \p{L}, \p{N},
// \p{P} or none of them. Not PCRE2's tables: those follow the installed library's Unicode
// version, which need not be llama.cpp's. Values above U+10FFFF are Other.
enum class CharClass : uint8_t { Other = 0, Letter = 1, Number = 2, Punctuation = 3 };
CharClass char_class(uint32_t cp);
// llama.cpp's whitespace (the Unicode White_Space property, U+0085 included).
bool is_whitespace(uint32_t cp);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace specdec::unicode
