#include "speculative/ngram_drafter.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"

namespace specdec {

namespace {

// P(copied token accepted | earlier drafts of the round accepted) by match length 1..8 (8: 8 or
// more), measured by replaying prompt lookup on greedy SmolLM2-135M output for the 12 bench
// prompts (scripts/ngram_policy_eval.py --replay): 454 tests at length 1 gave 0.18, 165 at 2
// gave 0.58, then 0.62, 0.70, 0.65-0.77 at 5-7 and 0.7-0.93 beyond. A single shared token is
// weak evidence (common words recur everywhere); a long one means a span is being quoted.
constexpr std::array<double, 8> kPriorAcceptance = {0.2, 0.5, 0.65, 0.7, 0.75, 0.75, 0.75, 0.85};
// The learned offset is clamped so that one long streak cannot pin the estimate for good.
constexpr double kMaxOffset = 3.0;
// Shrinks the offset towards the prior each time the policy declines a match: a run that was
// trimmed to nothing still returns to drafting after a while, since a declined draft teaches
// nothing about whether drafts would now pass.
constexpr double kForget = 0.98;

double logit(double p) { return std::log(p / (1.0 - p)); }

}  // namespace

const char* ngram_policy_name(NgramPolicy policy) {
  switch (policy) {
    case NgramPolicy::Fixed:
      return "fixed";
    case NgramPolicy::Adaptive:
      return "adaptive";
  }
  return "?";
}

NgramDrafter::NgramDrafter(int32_t n_vocab, const NgramParams& params)
    : n_vocab_(n_vocab), params_(params) {
  if (n_vocab < 1) fail("n-gram drafter: vocabulary size must be >= 1, got ", n_vocab);
  if (params.n_min < 1 || params.n_max < params.n_min || params.n_max > kMaxN) {
    fail("n-gram drafter: need 1 <= n-min <= n-max <= ", kMaxN, ", got n-min ", params.n_min,
         ", n-max ", params.n_max);
  }
  if (!(params.verify_cost >= 0.0f && params.verify_cost <= 10.0f)) {
    fail("n-gram drafter: verify cost must be in [0, 10], got ", params.verify_cost);
  }
  if (!(params.adapt_rate >= 0.0f && params.adapt_rate <= 1.0f)) {
    fail("n-gram drafter: adapt rate must be in [0, 1], got ", params.adapt_rate);
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
  // Each sequence learns afresh: what it accepts depends on its own prompt and settings.
  offset_ = 0;
  last_match_len_ = 0;
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
    if (!std::equal(suffix.begin(), suffix.end(), history.begin() + (e - n))) continue;
    // How far the agreement really reaches back: only the most recent occurrence of each n-gram
    // is indexed, and comparing further back is cheaper than indexing longer n-grams.
    int32_t match_len = n;
    while (match_len < kMaxMatch && e - match_len - 1 >= 0 &&
           history[static_cast<size_t>(e - match_len - 1)] ==
               history[static_cast<size_t>(len - match_len - 1)]) {
      ++match_len;
    }
    return {e, n, match_len};
  }
  return {};
}

double NgramDrafter::acceptance_estimate(int32_t match_len) const {
  const auto i = static_cast<size_t>(
      std::clamp<int32_t>(match_len, 1, static_cast<int32_t>(kPriorAcceptance.size())) - 1);
  return 1.0 / (1.0 + std::exp(-(logit(kPriorAcceptance[i]) + offset_)));
}

int32_t NgramDrafter::draft_length(int32_t match_len, int32_t available) const {
  // Greedy in k is optimal: the estimate per draft never falls with a longer match, but the
  // product does fall with k, so once draft k is not worth its cost no later draft is either.
  const double threshold = this->threshold();
  double reach = 1.0;  // P(drafts 1..k all accepted)
  int32_t m = 0;
  while (m < available) {
    reach *= acceptance_estimate(match_len + m);
    if (reach < threshold) break;
    ++m;
  }
  return m;
}

void NgramDrafter::observe(int32_t match_len, int32_t m, int32_t accepted) {
  if (params_.adapt_rate <= 0.0f) return;
  // One stochastic-gradient step on the log loss of the shared offset per tested draft: drafts
  // that keep failing pull every estimate down (shorter drafts, fewer rounds), drafts that keep
  // passing push them up. Shared rather than per length, so that lengths the policy has
  // stopped proposing still recover when drafts elsewhere succeed.
  const int32_t tested = std::min(accepted + 1, m);
  for (int32_t k = 0; k < tested; ++k) {
    const double outcome = k < accepted ? 1.0 : 0.0;
    offset_ += params_.adapt_rate * (outcome - acceptance_estimate(match_len + k));
  }
  offset_ = std::clamp(offset_, -kMaxOffset, kMaxOffset);
}

void NgramDrafter::finish_round(std::span<const int32_t> /*committed*/, int32_t /*n_before*/,
                                int32_t m, int32_t accepted) {
  if (params_.policy == NgramPolicy::Adaptive && m > 0) observe(last_match_len_, m, accepted);
}

int32_t NgramDrafter::propose(std::span<const int32_t> committed, int32_t gamma,
                              const SamplingParams& /*params*/, Rng& /*rng*/,
                              std::vector<int32_t>& drafts, std::vector<Distribution>& q) {
  const Match match = lookup(committed);
  if (match.pos < 0) return 0;
  // Copy what followed, stopping at γ and at the end of the history (the copy may run into the
  // suffix itself: for periodic text that is exactly the right guess).
  const int32_t available =
      std::min<int32_t>(gamma, static_cast<int32_t>(committed.size()) - match.pos);
  int32_t m = available;
  if (params_.policy == NgramPolicy::Adaptive) {
    m = draft_length(match.len, available);
    if (m == 0) {
      offset_ *= kForget;
      return 0;
    }
    last_match_len_ = match.len;
  }
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
