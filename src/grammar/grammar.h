// Grammars that constrain generation: llama.cpp's GBNF syntax, compiled once, and a parse state
// that consumes text byte by byte.
//
// Syntax (llama.cpp's grammars/README.md): rules `name ::= alternatives`, alternatives separated
// by `|`, sequences of terminals and nonterminals; string literals "..." and character classes
// [...] / [^...] with ranges and the escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH;
// the any-character `.`; grouping ( ... ); repetition * + ? {m} {m,} {m,n}; `#` comments to the
// end of the line; rule names of letters, digits and '-'. A rule's definition may continue on
// following lines (inside parentheses, or after a trailing `|`), as in llama.cpp. Beyond
// llama.cpp: a line that starts with `|` continues the rule above, `{,n}` is `{0,n}`, and the
// escapes \[ \' \/ \^ stand for their character.
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

namespace grammar_detail {
class StackSetMachine;
}

// Where a match stands. A value: copies are independent (and cheap: the stacks are shared,
// immutable; accept() builds new ones).
//
// Ambiguity is bounded: a state holds at most kMaxStacks stacks and 2^20 positions in all, and
// one character may cost at most 2^22 steps of expansion. A grammar so ambiguous that one
// character would pass a bound (say a long chain of optional items that may all be empty) makes
// the constructor or accept() throw specdec::Error ("grammar too ambiguous ..."), leaving the
// state as it was: a request then fails with that error instead of slowing down.
class GrammarState {
 public:
  // The state before any text.
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Consumes bytes (UTF-8; a code point may be split across calls). Returns false when no
  // sentence of the grammar starts with the text so far plus these bytes (or they are not
  // UTF-8); the state is then unusable (dead()) and every later accept() returns false. A
  // trailing unfinished character is kept, and refused at once when nothing it may still become
  // fits the grammar. Throws specdec::Error past the bounds above.
  bool accept(std::string_view bytes);
  bool accept_byte(uint8_t byte) {
    const char c = static_cast<char>(byte);
    return accept(std::string_view(&c, 1));
  }

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
  // key), which is what lets a caller cache the token mask of a state. The key is the sorted
  // set of stacks and the pending bytes, serialized; it does not name the grammar (a cache must
  // not mix states of different grammars).
  const std::string& key() const;

  // The number of alternative stacks (a measure of ambiguity; bounded, see above).
  size_t n_stacks() const;

 private:
  friend class grammar_detail::StackSetMachine;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Data> data_;  // immutable; accept() builds a new one
};

// Internals shared by grammar.cpp and token_mask.cpp; not an API.
namespace grammar_detail {

// Incremental strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF), one byte at a time.
struct Utf8Decoder {
  uint32_t cp = 0;    // the bits so far (the code point once complete)
  uint8_t need = 0;   // continuation bytes still to come
  uint8_t lo = 0x80;  // the range the next continuation byte must fall in
  uint8_t hi = 0xBF;

  // -1: invalid (the decoder is then unusable); 0: inside a character; 1: cp is complete.
  int feed(uint8_t b) {
    if (need == 0) {
      if (b < 0x80) {
        cp = b;
        return 1;
      }
      lo = 0x80;
      hi = 0xBF;
      if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        cp = b & 0x1Fu;
      } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        cp = b & 0x0Fu;
        if (b == 0xE0) lo = 0xA0;  // no overlong forms
        if (b == 0xED) hi = 0x9F;  // no surrogates
      } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        cp = b & 0x07u;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
      } else {
        return -1;
      }
      return 0;
    }
    if (b < lo || b > hi) return -1;
    cp = (cp << 6) | (b & 0x3Fu);
    lo = 0x80;
    hi = 0xBF;
    return --need == 0 ? 1 : 0;
  }
  // Inside a character (need > 0): the code points it may still become, a contiguous range.
  uint32_t min_cp() const { return ((cp << 6) | (lo & 0x3Fu)) << (6 * (need - 1)); }
  uint32_t max_cp() const {
    const uint32_t shift = 6 * (need - 1u);
    return (((cp << 6) | (hi & 0x3Fu)) << shift) | ((1u << shift) - 1);
  }
};

// The token mask's engine: a grammar's stack sets interned as small integers (stacks as
// hash-consed linked nodes, so a step copies nothing), with memoized transitions per set and
// code point, so that a trie walk that keeps returning to the same set (every character inside
// a JSON string) costs a table lookup per byte. Not thread safe; one per GrammarMasker.
class StackSetMachine {
 public:
  static constexpr int32_t kDead = -1;

  explicit StackSetMachine(std::shared_ptr<const Grammar> grammar);
  ~StackSetMachine();
  StackSetMachine(const StackSetMachine&) = delete;
  StackSetMachine& operator=(const StackSetMachine&) = delete;

  const Grammar* grammar() const;
  static const std::shared_ptr<const Grammar>& grammar_of(const GrammarState& state);
  // The set of a live state's stacks, and its pending UTF-8 decoder.
  int32_t set_of(const GrammarState& state, Utf8Decoder* decoder);
  // The set after one more code point, or kDead. Throws specdec::Error past the ambiguity bound
  // (as GrammarState::accept) or past the work budget (see reset_budget).
  int32_t step(int32_t set, uint32_t cp);
  // Whether some stack of the set accepts a code point that the decoder, inside a character,
  // may still produce.
  bool accepts_some(int32_t set, const Utf8Decoder& decoder);
  // Whether some stack of the set is empty (the text so far is a sentence).
  bool has_empty(int32_t set) const;

  // Interned data, in 4-byte units; clear() forgets it (invalidating every set id).
  size_t size() const;
  void clear();
  // step() throws once this many stack expansions were done since the last reset, or once
  // size() passes `max_size`: bounds the time and memory of one mask on a hostile grammar.
  void reset_budget(size_t max_work, size_t max_size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grammar_detail

}  // namespace specdec
