#include "speculative/ngram_drafter.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

NgramDrafter::NgramDrafter(int32_t n_vocab, const NgramParams& params)
    : n_vocab_(n_vocab), params_(params) {
  if (n_vocab < 1) fail("n-gram drafter: vocabulary size must be >= 1, got ", n_vocab);
  if (params.n_min < 1 || params.n_max < params.n_min || params.n_max > kMaxN) {
    fail("n-gram drafter: need 1 <= n-min <= n-max <= ", kMaxN, ", got n-min ", params.n_min,
         ", n-max ", params.n_max);
  }
  index_.resize(static_cast<size_t>(params.n_max - params.n_min + 1));
}

uint64_t NgramDrafter::hash(std::span<const int32_t> gram) {
  // splitmix64 chained over the tokens: a 64-bit key; hits are re-checked against the tokens, so
  // a collision can only cost a missed match, never a wrong one.
  uint64_t h = 0x9e3779b97f4a7c15ULL * (gram.size() + 1);
  for (int32_t t : gram) {
    uint64_t z = h ^ static_cast<uint64_t>(static_cast<uint32_t>(t));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    h = z ^ (z >> 31);
  }
  return h;
}

void NgramDrafter::start(std::span<const int32_t> /*prompt*/, int32_t /*n_cached*/) {
  // The index is rebuilt lazily from the new history on the first lookup: O(n_max) per token,
  // negligible next to one target forward per token of prefill.
  for (auto& m : index_) m.clear();
  indexed_ = 0;
}

void NgramDrafter::index_up_to(std::span<const int32_t> history) {
  const auto len = static_cast<int32_t>(history.size());
  if (len < indexed_) fail("n-gram drafter: history shrank from ", indexed_, " to ", len);
  // Position e gets a continuation once t[e] is committed: insert every n-gram t[e-n..e).
  for (int32_t e = std::max(indexed_, 1); e < len; ++e) {
    for (int32_t n = params_.n_min; n <= params_.n_max && n <= e; ++n) {
      const auto gram = history.subspan(static_cast<size_t>(e - n), static_cast<size_t>(n));
      index_[static_cast<size_t>(n - params_.n_min)][hash(gram)] = e;
    }
  }
  indexed_ = std::max(indexed_, len);
}

NgramDrafter::Match NgramDrafter::lookup(std::span<const int32_t> history) {
  index_up_to(history);
  const auto len = static_cast<int32_t>(history.size());
  // Longest suffix first: a longer match is stronger evidence that the text is being repeated.
  for (int32_t n = std::min(params_.n_max, len - 1); n >= params_.n_min; --n) {
    const std::span<const int32_t> suffix = history.subspan(static_cast<size_t>(len - n));
    const auto& map = index_[static_cast<size_t>(n - params_.n_min)];
    const auto it = map.find(hash(suffix));
    if (it == map.end()) continue;
    const int32_t e = it->second;  // the occurrence is t[e-n..e), followed by t[e], e < len
    if (std::equal(suffix.begin(), suffix.end(), history.begin() + (e - n))) return {e, n};
  }
  return {};
}

int32_t NgramDrafter::propose(std::span<const int32_t> committed, int32_t gamma,
                              const SamplingParams& /*params*/, Rng& /*rng*/,
                              std::vector<int32_t>& drafts, std::vector<Distribution>& q) {
  const Match match = lookup(committed);
  if (match.pos < 0) return 0;
  // Copy what followed, stopping at γ and at the end of the history (the copy may run into the
  // suffix itself: for periodic text that is exactly the right guess).
  const int32_t m = std::min<int32_t>(gamma, static_cast<int32_t>(committed.size()) - match.pos);
  if (drafts.size() < static_cast<size_t>(m)) drafts.resize(static_cast<size_t>(m));
  if (q.size() < static_cast<size_t>(m)) q.resize(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) {
    const int32_t y = committed[static_cast<size_t>(match.pos + i)];
    drafts[static_cast<size_t>(i)] = y;
    // q_i is one-hot on y_i: the proposal is a deterministic function of the context. No draw
    // from rng, so the stream is the target's alone (accept tests, corrections, bonuses).
    Distribution& d = q[static_cast<size_t>(i)];
    d.ids.assign(1, y);
    d.probs.assign(1, 1.0f);
    d.n_vocab = n_vocab_;
  }
  return m;
}

}  // namespace specdec
