// Text written into GBNF source: one code point inside a literal or a class, and a whole
// literal. Shared by the generators of grammars (JSON Schema, regular expressions, choices).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specdec {

// One code point as GBNF writes it inside a literal or a class: what either treats specially
// escaped, control characters as \x, the rest of ASCII as is, other text as raw UTF-8.
std::string gbnf_char(uint32_t cp);

// A GBNF string literal matching the UTF-8 `text` exactly (vLLM's guided_choice is an alternation
// of them).
std::string gbnf_literal(std::string_view text);

}  // namespace specdec
