// Vocabulary masks (token_mask.h).
//
// The trie is laid out in depth-first preorder: node i's subtree is nodes [i, i + subtree[i]),
// so the walk is one forward scan that skips a dead subtree in one jump. Per depth it keeps the
// stack set (an id in a grammar_detail::StackSetMachine) and the UTF-8 decoder after the bytes
// above; a byte that completes a character is one memoized transition (a table lookup for
// ASCII once seen), a byte inside a character is a memoized check that some stack still accepts
// a character it may become.
#include "grammar/token_mask.h"

#include <algorithm>
#include <string_view>

#include "common/error.h"

namespace specdec {

namespace {

// Machine budgets (4-byte units; expansion steps): far above any real grammar's needs (a JSON
// schema's walk stays under a few MiB), they stop a hostile grammar's walk from taking seconds
// or gigabytes.
constexpr size_t kMachineKeep = size_t{1} << 22;  // cleared before a walk beyond this (16 MiB)
constexpr size_t kMachineMax = size_t{1} << 25;   // a walk throws beyond this (128 MiB)
constexpr size_t kWalkWork = size_t{1} << 25;     // expansion steps in one walk

void set_bit(std::vector<uint64_t>& bits, int32_t token) {
  bits[static_cast<size_t>(token) / 64] |= uint64_t{1} << (static_cast<uint32_t>(token) % 64);
}

}  // namespace

struct GrammarVocab::Trie {
  std::vector<uint32_t> info;         // per node: depth << 8 | the byte on the edge into it
  std::vector<uint32_t> subtree;      // nodes in the subtree, the node itself included
  std::vector<uint32_t> token_first;  // node i's tokens: tokens[token_first[i], token_first[i+1])
  std::vector<int32_t> tokens;
  uint32_t max_depth = 0;
};

GrammarVocab::GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), is_end_(bytes_.size(), 0), trie_(std::make_unique<Trie>()) {
  if (bytes_.size() > static_cast<size_t>(INT32_MAX)) fail("grammar vocabulary: too many tokens");
  for (const int32_t id : end_ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) {
      fail("grammar vocabulary: end token ", id, " is out of range");
    }
    if (!is_end_[static_cast<size_t>(id)]) end_ids_.push_back(id);
    is_end_[static_cast<size_t>(id)] = 1;
  }
  std::sort(end_ids_.begin(), end_ids_.end());

  // In sorted order each token shares a prefix with the previous one and adds nodes for the
  // rest: exactly the preorder.
  std::vector<int32_t> order;
  order.reserve(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!is_end_[i] && !bytes_[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    const std::string& x = bytes_[static_cast<size_t>(a)];
    const std::string& y = bytes_[static_cast<size_t>(b)];
    const int c = x.compare(y);  // bytewise: std::char_traits<char>::compare is memcmp
    return c != 0 ? c < 0 : a < b;
  });
  Trie& t = *trie_;
  t.info.push_back(0);
  t.subtree.push_back(0);
  t.token_first.push_back(0);
  std::vector<uint32_t> path = {0};  // the open nodes, by depth
  std::string_view prev;
  for (const int32_t id : order) {
    const std::string_view b = bytes_[static_cast<size_t>(id)];
    if (b.size() >= (size_t{1} << 24)) fail("grammar vocabulary: token ", id, " is too long");
    size_t common = 0;
    while (common < b.size() && common < prev.size() && b[common] == prev[common]) ++common;
    while (path.size() > common + 1) {
      t.subtree[path.back()] = static_cast<uint32_t>(t.info.size()) - path.back();
      path.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(static_cast<uint32_t>(t.info.size()));
      t.info.push_back(static_cast<uint32_t>((d + 1) << 8) | static_cast<uint8_t>(b[d]));
      t.subtree.push_back(0);
      t.token_first.push_back(static_cast<uint32_t>(t.tokens.size()));
    }
    t.tokens.push_back(id);
    t.max_depth = std::max(t.max_depth, static_cast<uint32_t>(b.size()));
    prev = b;
  }
  while (!path.empty()) {
    t.subtree[path.back()] = static_cast<uint32_t>(t.info.size()) - path.back();
    path.pop_back();
  }
  t.token_first.push_back(static_cast<uint32_t>(t.tokens.size()));
}

GrammarVocab::~GrammarVocab() = default;

int32_t GrammarVocab::n_vocab() const { return static_cast<int32_t>(bytes_.size()); }

bool GrammarVocab::is_end(int32_t token) const {
  return token >= 0 && static_cast<size_t>(token) < is_end_.size() &&
         is_end_[static_cast<size_t>(token)] != 0;
}

const std::string& GrammarVocab::bytes(int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= bytes_.size()) {
    fail("grammar vocabulary: token ", token, " is out of range");
  }
  return bytes_[static_cast<size_t>(token)];
}

GrammarMasker::GrammarMasker(std::shared_ptr<const GrammarVocab> vocab, size_t max_cached)
    : vocab_(std::move(vocab)), max_cached_(std::max<size_t>(1, max_cached)) {
  if (!vocab_) fail("GrammarMasker: no vocabulary");
}
GrammarMasker::~GrammarMasker() = default;
GrammarMasker::GrammarMasker(GrammarMasker&&) noexcept = default;

std::span<const uint64_t> GrammarMasker::allowed(const GrammarState& state) {
  using grammar_detail::StackSetMachine;
  const std::shared_ptr<const Grammar>& grammar = StackSetMachine::grammar_of(state);
  if (grammar.get() != grammar_) {  // keys only mean something within one grammar
    cache_.clear();
    machine_.reset();
    grammar_ = grammar.get();
  }
  const std::string& key = state.key();
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  std::vector<uint64_t> bits((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  if (!state.dead()) {
    if (state.complete()) {
      for (const int32_t t : vocab_->end_ids_) set_bit(bits, t);
    }
    if (!machine_) machine_ = std::make_unique<StackSetMachine>(grammar);
    if (machine_->size() > kMachineKeep) machine_->clear();
    machine_->reset_budget(kWalkWork, kMachineMax);
    try {
      walk(state, bits);
    } catch (...) {
      machine_->clear();  // a step may have stopped halfway
      throw;
    }
  }
  if (cache_.size() >= max_cached_) cache_.clear();
  return cache_.emplace(key, std::move(bits)).first->second;
}

void GrammarMasker::walk(const GrammarState& state, std::vector<uint64_t>& bits) {
  using grammar_detail::StackSetMachine;
  using grammar_detail::Utf8Decoder;
  const GrammarVocab::Trie& t = vocab_->trie();
  StackSetMachine& m = *machine_;
  walk_sets_.resize(t.max_depth + 1);
  walk_dec_.resize(t.max_depth + 1);
  walk_sets_[0] = m.set_of(state, &walk_dec_[0]);
  const auto n = static_cast<uint32_t>(t.info.size());
  for (uint32_t i = 1; i < n;) {
    const uint32_t info = t.info[i];
    const uint32_t d = info >> 8;
    Utf8Decoder dec = walk_dec_[d - 1];
    int32_t set = walk_sets_[d - 1];
    const int r = dec.feed(static_cast<uint8_t>(info & 0xFF));
    bool alive = false;
    if (r > 0) {
      set = m.step(set, dec.cp);
      alive = set != StackSetMachine::kDead;
    } else if (r == 0) {
      alive = m.accepts_some(set, dec);
    }
    if (!alive) {
      i += t.subtree[i];
      continue;
    }
    walk_sets_[d] = set;
    walk_dec_[d] = dec;
    for (uint32_t k = t.token_first[i]; k < t.token_first[i + 1]; ++k) set_bit(bits, t.tokens[k]);
    ++i;
  }
}

bool GrammarMasker::allows(const GrammarState& state, int32_t token) const {
  GrammarState next = state;
  return advance(next, token);
}

bool GrammarMasker::advance(GrammarState& state, int32_t token) const {
  const std::string& b = vocab_->bytes(token);  // throws when out of range
  if (state.dead()) return false;
  if (vocab_->is_end(token)) return state.complete();
  if (b.empty()) return false;
  GrammarState next = state;
  if (!next.accept(b)) return false;
  state = std::move(next);
  return true;
}

}  // namespace specdec
