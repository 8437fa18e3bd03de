#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace specdec {

// Children of node i: child_[first_[i] .. first_[i + 1]), sorted by byte; the tokens whose bytes
// end at node i: tokens_[token_first_[i] .. token_first_[i + 1]).
struct GrammarVocab::Trie {
  std::vector<uint32_t> first, token_first;
  std::vector<uint8_t> child_byte;
  std::vector<uint32_t> child_node;
  std::vector<int32_t> tokens;
};

GrammarVocab::GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), is_end_(bytes_.size(), 0), trie_(std::make_unique<Trie>()) {
  for (int32_t id : end_ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) {
      fail("grammar vocabulary: end token ", id, " is out of range");
    }
    is_end_[static_cast<size_t>(id)] = 1;
  }
  // Sorted by bytes, the tokens under one node are contiguous: build the trie level by level
  // from ranges of the sorted order (breadth first, so each node's children are adjacent).
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!is_end_[i] && !bytes_[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  struct Pending {
    size_t begin, end, depth;  // order[begin, end) share their first `depth` bytes
  };
  std::vector<Pending> level{{0, order.size(), 0}};
  Trie& t = *trie_;
  std::vector<Pending> next;
  while (!level.empty()) {
    next.clear();
    for (const Pending& p : level) {
      // Node for p: tokens exactly depth bytes long come first in sorted order.
      t.token_first.push_back(static_cast<uint32_t>(t.tokens.size()));
      size_t i = p.begin;
      while (i < p.end && bytes_[static_cast<size_t>(order[i])].size() == p.depth) {
        t.tokens.push_back(order[i++]);
      }
      t.first.push_back(static_cast<uint32_t>(t.child_byte.size()));
      while (i < p.end) {
        const auto b = static_cast<uint8_t>(bytes_[static_cast<size_t>(order[i])][p.depth]);
        size_t j = i;
        while (j < p.end &&
               static_cast<uint8_t>(bytes_[static_cast<size_t>(order[j])][p.depth]) == b) {
          ++j;
        }
        t.child_byte.push_back(b);
        t.child_node.push_back(0);  // its index once the next level is laid out
        next.push_back({i, j, p.depth + 1});
        i = j;
      }
    }
    // Node indices are assigned in creation order, level by level.
    const size_t base = t.first.size();
    for (size_t k = 0; k < next.size(); ++k) {
      t.child_node[t.child_node.size() - next.size() + k] = static_cast<uint32_t>(base + k);
    }
    std::swap(level, next);
  }
  t.first.push_back(static_cast<uint32_t>(t.child_byte.size()));
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
    : vocab_(std::move(vocab)), max_cached_(std::max<size_t>(1, max_cached)) {}

namespace {

void set_bit(std::vector<uint64_t>& bits, int32_t token) {
  bits[static_cast<size_t>(token) / 64] |= uint64_t{1} << (static_cast<uint32_t>(token) % 64);
}

void walk(const GrammarVocab::Trie& t, uint32_t node, const GrammarState& state,
          std::vector<uint64_t>& bits) {
  for (uint32_t c = t.first[node]; c < t.first[node + 1]; ++c) {
    const uint32_t child = t.child_node[c];
    const auto mark = [&] {
      for (uint32_t k = t.token_first[child]; k < t.token_first[child + 1]; ++k) {
        set_bit(bits, t.tokens[k]);
      }
    };
    // Inside a JSON string most bytes leave the state as it is: no copy for those.
    if (state.loops_on(t.child_byte[c])) {
      mark();
      walk(t, child, state, bits);
      continue;
    }
    GrammarState next = state;
    if (!next.accept_byte(t.child_byte[c])) continue;
    mark();
    walk(t, child, next, bits);
  }
}

}  // namespace

std::span<const uint64_t> GrammarMasker::allowed(const GrammarState& state) {
  const std::string& key = state.key();
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  if (cache_.size() >= max_cached_) cache_.clear();
  std::vector<uint64_t> bits((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  if (!state.dead()) {
    walk(vocab_->trie(), 0, state, bits);
    if (state.complete()) {
      for (int32_t t = 0; t < vocab_->n_vocab(); ++t) {
        if (vocab_->is_end(t)) set_bit(bits, t);
      }
    }
  }
  return cache_.emplace(key, std::move(bits)).first->second;
}

bool GrammarMasker::allows(const GrammarState& state, int32_t token) const {
  GrammarState next = state;
  return advance(next, token);
}

bool GrammarMasker::advance(GrammarState& state, int32_t token) const {
  if (state.dead()) return false;
  if (vocab_->is_end(token)) return state.complete();
  const std::string& b = vocab_->bytes(token);
  return !b.empty() && state.accept(b);
}

}  // namespace specdec
