// SentencePiece-style merging as llama.cpp implements it: start from UTF-8 characters, repeatedly
// merge the adjacent pair whose concatenation is a vocab token with the highest score (leftmost
// on ties); pieces that end up not being tokens are re-split along the merges that built them,
// and anything still unknown falls back to <0xXX> byte tokens.
#include <map>
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace specdec {

namespace {

struct Symbol {
  size_t begin, len;
  int prev, next;
};

struct Candidate {
  float score;
  int left, right;
  size_t len;
};

struct WorseFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Tokenizer::Impl& impl, std::string_view text) : impl_(impl), text_(text) {}

  void run(std::vector<int32_t>& out) {
    if (text_.empty()) return;
    for (size_t off = 0; off < text_.size();) {
      const size_t n =
          std::min(text_.size() - off, unicode::lead_byte_len(static_cast<uint8_t>(text_[off])));
      const int idx = static_cast<int>(syms_.size());
      syms_.push_back({off, n, idx - 1, off + n < text_.size() ? idx + 1 : -1});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(syms_.size()); ++i) try_pair(i - 1, i);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& l = syms_[c.left];
      Symbol& r = syms_[c.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) syms_[r.next].prev = c.left;
      try_pair(l.prev, c.left);
      try_pair(c.left, l.next);
    }
    for (int i = 0; i >= 0; i = syms_[i].next)
      emit(text_.substr(syms_[i].begin, syms_[i].len), out);
  }

 private:
  void try_pair(int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view joined = text_.substr(syms_[l].begin, syms_[l].len + syms_[r].len);
    auto id = impl_.find(joined);
    if (!id) return;
    queue_.push({impl_.data.scores.empty() ? 0.0f : impl_.data.scores[*id], l, r, joined.size()});
    // Remember how this text was first assembled from the current symbols (llama.cpp
    // overwrites on re-insertion; the last pairing wins).
    built_from_[joined] = {syms_[l].begin, syms_[l].len, syms_[r].begin, syms_[r].len};
  }

  void emit(std::string_view piece, std::vector<int32_t>& out) {
    if (auto id = impl_.find(piece)) {
      out.push_back(*id);
      return;
    }
    auto it = built_from_.find(piece);
    if (it == built_from_.end()) {
      for (char ch : piece) {
        const int32_t b = impl_.byte_tokens[static_cast<uint8_t>(ch)];
        out.push_back(b >= 0 ? b : impl_.data.unk);
      }
      return;
    }
    const auto [lb, ll, rb, rl] = it->second;
    emit(text_.substr(lb, ll), out);
    emit(text_.substr(rb, rl), out);
  }

  const Tokenizer::Impl& impl_;
  std::string_view text_;
  std::vector<Symbol> syms_;
  std::priority_queue<Candidate, std::vector<Candidate>, WorseFirst> queue_;
  struct Parts {
    size_t lb, ll, rb, rl;
  };
  std::map<std::string_view, Parts> built_from_;
};

}  // namespace

void spm_encode(const Tokenizer::Impl& impl, std::string_view text, std::vector<int32_t>& out) {
  SpmSession(impl, text).run(out);
}

}  // namespace specdec
