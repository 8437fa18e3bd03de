// Regular expressions as grammars: vLLM's guided_regex (the whole output matches the pattern)
// and JSON Schema's "pattern" (a string value that the pattern matches somewhere in), compiled to
// one GBNF expression so that constrained generation only writes text the pattern accepts.
#pragma once

#include <string>
#include <string_view>

namespace specdec {

// What the pattern's characters become in the output.
enum class RegexText {
  kPlain,       // themselves (guided_regex)
  kJsonString,  // the inside of a JSON string: '"', '\' and control characters escaped
};

// Where the pattern must match.
enum class RegexMatch {
  kWhole,   // the whole text, whether or not the pattern says ^ and $ (vLLM, outlines)
  kSearch,  // anywhere in it unless anchored by ^ and $ (JSON Schema, ECMA-262)
};

// A GBNF expression (no rules of its own: usable as `root ::= <it>` or inside a rule) whose
// language is that of `pattern`, read with ECMAScript's syntax and meaning:
// - literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H...} \cX, a surrogate pair of \u
//   escapes as one character, an escaped punctuation character as itself);
// - classes [...] and [^...] with ranges, \d \w \s and their negations (ASCII digits and word
//   characters; \s as ECMAScript's white space and line terminators), '.' (anything but \n, \r,
//   U+2028 and U+2029);
// - groups (...), (?:...), (?<name>...) and (?P<name>...), alternation |, and the quantifiers
//   * + ? {n} {n,} {n,m} {,m}, each greedy or lazy (the same language);
// - ^ and $ (also \A and \Z) at the start and end of the pattern's top-level alternatives.
// Backreferences, lookaround, word boundaries, possessive quantifiers, inline flags, Unicode
// property escapes and anchors elsewhere throw specdec::Error naming the offset (in code points)
// of what is not supported, as do a malformed pattern, a pattern that can match nothing, and
// bounds beyond the limits (16 KiB of pattern, 64 nested groups, counts up to 10,000).
std::string regex_gbnf(std::string_view pattern, RegexText text, RegexMatch match);

}  // namespace specdec
