// Grammars that constrain generation: llama.cpp's GBNF syntax, compiled once, and a parse state
// that consumes text byte by byte.
//
// Syntax (llama.cpp's grammars/README.md): rules `name ::= alternatives`, alternatives separated
// by `|`, sequences of terminals and nonterminals; string literals "..." and character classes
// [...] / [^...] with ranges and the escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH;
// the any-character `.`; grouping ( ... ); repetition * + ? {m} {m,} {m,n}; `#` comments to the
// end of the line; rule names of letters, digits and '-'. A rule's definition may continue on
// following lines (inside parentheses, or after a trailing `|`), as in llama.cpp.
//
// Matching is on Unicode code points. The state is the set of every way the text so far can be
// continued (a set of stacks of grammar positions, as in llama.cpp's sampler), plus the bytes of
// an unfinished UTF-8 sequence, so a token may end in the middle of a character.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

class Grammar {
 public:
  // Compiles GBNF text whose start symbol is `root`. Throws specdec::Error, naming the line and
  // column, on a syntax error, an undefined or missing root rule, a rule defined twice, left
  // recursion (a rule that can reach itself without consuming a character, which would make
  // matching loop), a repetition bound over 10,000, or a grammar over 1 MiB of text.
  static std::shared_ptr<const Grammar> parse(std::string_view gbnf,
                                              std::string_view root = "root");

  struct Impl;
  explicit Grammar(std::unique_ptr<Impl> impl);
  ~Grammar();
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Where a match stands. A value: copies are independent.
class GrammarState {
 public:
  // The state before any text.
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Consumes bytes (UTF-8; a code point may be split across calls). Returns false when no
  // sentence of the grammar starts with the text so far plus these bytes (or they are not
  // UTF-8); the state is then unusable (dead()) and every later accept() returns false. Throws
  // specdec::Error when the grammar is so ambiguous that more than kMaxStacks ways to continue
  // would have to be tracked (a request then fails with that error instead of slowing down).
  bool accept(std::string_view bytes);
  bool accept_byte(uint8_t byte);

  static constexpr size_t kMaxStacks = 4096;
  struct Data;  // the stacks (grammar.cpp)
  // Whether the text so far is a whole sentence of the grammar (and ends on a whole character).
  bool complete() const;
  // Whether some longer text is still a sentence prefix (false at the end of a grammar such as
  // root ::= "a": after "a" only the end may come).
  bool can_continue() const;
  bool dead() const;

  // The state's identity for memoization: equal keys mean equal futures. Two states reached by
  // different texts may share a key (inside one JSON string every character leaves the same
  // key), which is what lets a caller cache the token mask of a state.
  const std::string& key() const;

  // The number of alternative stacks (a measure of ambiguity; bounded, see accept()).
  size_t n_stacks() const;

 private:
  bool accept_code_point(uint32_t cp);
  // Whether some stack's next character can be a code point from lo to hi (pruning a partial
  // UTF-8 sequence early).
  bool may_match(uint32_t lo, uint32_t hi) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Data> data_;  // immutable; accept() builds a new one (null: dead)
  uint32_t partial_ = 0;              // the bits of an unfinished UTF-8 sequence
  uint8_t partial_left_ = 0;          // continuation bytes still expected
  uint8_t partial_len_ = 0;           // bytes of it seen
  mutable std::string key_;           // key(), built on demand
};

}  // namespace specdec
