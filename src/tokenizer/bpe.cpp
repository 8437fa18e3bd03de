// Byte-level BPE merging within one word, matching llama.cpp: repeatedly merge the adjacent pair
// with the lowest merge rank (leftmost on ties); queue entries made stale by earlier merges are
// detected by re-checking the pair's text.
#include <queue>

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace specdec {

std::string merge_key(std::string_view left, std::string_view right) {
  return str_cat(left.size(), '\x01', left, right);
}

namespace {

struct Symbol {
  size_t begin, len;
  int prev, next;
};

struct Candidate {
  int rank;
  int left, right;
  size_t len;  // combined byte length when queued; a mismatch later means it is stale
};

struct LaterFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void bpe_encode_word(const Tokenizer::Impl& impl, std::string_view word,
                     std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (impl.pre->ignore_merges()) {
    if (auto id = impl.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<Symbol> syms;
  for (size_t off = 0; off < word.size();) {
    const size_t n =
        std::min(word.size() - off, unicode::lead_byte_len(static_cast<uint8_t>(word[off])));
    const int idx = static_cast<int>(syms.size());
    syms.push_back({off, n, idx - 1, off + n < word.size() ? idx + 1 : -1});
    off += n;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, LaterFirst> queue;
  auto text = [&](int i) { return word.substr(syms[i].begin, syms[i].len); };
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    auto it = impl.bpe_ranks.find(merge_key(text(l), text(r)));
    if (it == impl.bpe_ranks.end()) return;
    queue.push({it->second, l, r, syms[l].len + syms[r].len});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[c.left];
    Symbol& r = syms[c.right];
    // Symbols only ever grow to the right and are contiguous, so "still adjacent with the same
    // total length" is equivalent to llama.cpp's "same text" staleness check.
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }

  for (int i = 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = text(i);
    if (auto id = impl.find(piece)) {
      out.push_back(*id);
      continue;
    }
    // llama.cpp falls back to single-byte lookups of the (byte-encoded) piece; bytes that are
    // not tokens by themselves are dropped.
    for (char ch : piece) {
      if (auto id = impl.find(std::string_view(&ch, 1))) out.push_back(*id);
    }
  }
}

}  // namespace specdec
