// Which vocabulary tokens a grammar allows next: a byte trie over the vocabulary, walked from a
// GrammarState with pruning (a branch dies at the first byte no sentence can continue with), and
// a per-request cache keyed by GrammarState::key(), because a structured answer revisits the same
// few states (every character inside a JSON string leaves the same one).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace specdec {

// The vocabulary as the grammar sees it; immutable, shared by every request on a tokenizer.
class GrammarVocab {
 public:
  // token_bytes[i]: the text token i decodes to (empty for control tokens: never allowed).
  // end_ids: the tokens that end generation (end of text/turn); allowed exactly when the state is
  // complete(). A token in end_ids is never matched by its bytes.
  GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids);
  ~GrammarVocab();

  int32_t n_vocab() const;
  bool is_end(int32_t token) const;
  const std::string& bytes(int32_t token) const;

  struct Trie;
  const Trie& trie() const { return *trie_; }

 private:
  friend class GrammarMasker;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> is_end_;
  std::vector<int32_t> end_ids_;
  std::unique_ptr<Trie> trie_;
};

// One request's view: the allowed set per state, cached. Not thread safe (one per sequence).
// The walk steps a grammar_detail::StackSetMachine (memoized transitions between interned stack
// sets) rather than copying GrammarStates; allowed() throws specdec::Error when the grammar is
// too ambiguous (as GrammarState::accept) or a walk would pass its time or memory budget (only
// hostile grammars do). The cache is by GrammarState::key(); it is cleared when a state of
// another grammar comes, and entirely once it holds max_cached masks.
class GrammarMasker {
 public:
  explicit GrammarMasker(std::shared_ptr<const GrammarVocab> vocab, size_t max_cached = 256);
  ~GrammarMasker();
  GrammarMasker(GrammarMasker&&) noexcept;

  // Bit t of the result (word t / 64, bit t % 64) says whether token t may follow `state`: an end
  // token when state.complete(), any other token when state.accept(its bytes) would succeed.
  // The span stays valid until the next call.
  std::span<const uint64_t> allowed(const GrammarState& state);
  // Whether one token may follow (no trie walk: its bytes alone).
  bool allows(const GrammarState& state, int32_t token) const;
  // Advances state by token (an end token leaves it unchanged); false when not allowed.
  bool advance(GrammarState& state, int32_t token) const;

  const GrammarVocab& vocab() const { return *vocab_; }
  size_t cache_hits() const { return hits_; }
  size_t cache_misses() const { return misses_; }

 private:
  void walk(const GrammarState& state, std::vector<uint64_t>& bits);

  std::shared_ptr<const GrammarVocab> vocab_;
  size_t max_cached_;
  std::unordered_map<std::string, std::vector<uint64_t>> cache_;
  size_t hits_ = 0, misses_ = 0;
  // The walk's engine, for the grammar of the states seen (cache_ holds masks of its states).
  std::unique_ptr<grammar_detail::StackSetMachine> machine_;
  const Grammar* grammar_ = nullptr;
  std::vector<int32_t> walk_sets_;  // per trie depth: the stack set after that many bytes
  std::vector<grammar_detail::Utf8Decoder> walk_dec_;
};

}  // namespace specdec
