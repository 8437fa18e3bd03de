#include "speculative/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.h"

namespace specdec {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

float entropy(const Distribution& d) {
  double h = 0;
  for (float p : d.probs) {
    if (p > 0) h -= static_cast<double>(p) * std::log(static_cast<double>(p));
  }
  return static_cast<float>(h);
}

std::span<const float> row(const std::vector<float>& logits, int32_t n_vocab, size_t i) {
  return std::span<const float>(logits).subspan(i * static_cast<size_t>(n_vocab),
                                                static_cast<size_t>(n_vocab));
}

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(CausalLM& target, CausalLM* draft,
                                       const SamplingParams& params, int32_t gamma, Rng& rng)
    : target_(target), draft_(draft), params_(params), gamma_(gamma), rng_(rng) {
  if (gamma < 0) fail("speculative decoder: gamma must be >= 0, got ", gamma);
  if (draft && draft->n_vocab() != target.n_vocab()) {
    fail("speculative decoder: draft vocabulary (", draft->n_vocab(), ") differs from target's (",
         target.n_vocab(), ")");
  }
}

void SpeculativeDecoder::start(std::span<const int32_t> prompt, int32_t max_new_tokens,
                               StopPredicate stop, int32_t n_cached) {
  if (prompt.empty()) fail("speculative decoder: empty prompt");
  const auto n = static_cast<int32_t>(prompt.size());
  if (n > target_.capacity()) {
    fail("prompt of ", n, " tokens does not fit the context of ", target_.capacity());
  }
  if (n_cached < 0 || n_cached > n - 1 || n_cached > target_.length() ||
      (draft_ && n_cached > draft_->length())) {
    fail("speculative decoder: invalid cached prefix length ", n_cached);
  }
  tokens_.assign(prompt.begin(), prompt.end());
  prompt_len_ = prompt.size();
  max_new_ = max_new_tokens;
  generated_ = 0;
  stop_ = std::move(stop);
  stats_ = DecodeStats{};
  stats_.accepted_hist.assign(static_cast<size_t>(gamma_) + 1, 0);

  target_.truncate(n_cached);
  if (n_cached < n - 1) {
    target_.forward(
        prompt.subspan(static_cast<size_t>(n_cached), static_cast<size_t>(n - 1 - n_cached)),
        logits_);
  }
  if (draft_) draft_->truncate(n_cached);
  draft_len_ = n_cached;
  reason_ = max_new_tokens > 0 ? StopReason::None : StopReason::MaxTokens;
}

bool SpeculativeDecoder::commit(int32_t token) {
  tokens_.push_back(token);
  ++generated_;
  ++stats_.emitted;
  if (stop_ && stop_(token)) {
    reason_ = StopReason::StopToken;
  } else if (generated_ >= max_new_) {
    reason_ = StopReason::MaxTokens;
  }
  return reason_ == StopReason::None;
}

bool SpeculativeDecoder::target_full() {
  // The pending token goes to position n-1, which needs n <= capacity.
  if (static_cast<int64_t>(tokens_.size()) > target_.capacity()) {
    reason_ = StopReason::ContextFull;
    return true;
  }
  return false;
}

int32_t SpeculativeDecoder::effective_gamma() const {
  if (!draft_) return 0;
  const auto n = static_cast<int64_t>(tokens_.size());
  int64_t g = gamma_;
  g = std::min<int64_t>(g, max_new_ - generated_ - 1);   // a round emits up to γ + 1 tokens
  g = std::min<int64_t>(g, target_.capacity() - n);      // verify writes positions n-1..n+γ-1
  g = std::min<int64_t>(g, draft_->capacity() - n + 1);  // draft writes positions up to n+γ-2
  return static_cast<int32_t>(std::max<int64_t>(g, 0));
}

int32_t SpeculativeDecoder::step_baseline() {
  if (done() || target_full()) return 0;
  const auto t0 = Clock::now();
  const int32_t v = target_.n_vocab();
  p_.resize(std::max<size_t>(p_.size(), 1));
  target_.forward(std::span<const int32_t>(&tokens_.back(), 1), logits_);
  make_distribution(row(logits_, v, 0), params_, p_[0]);
  const int32_t token = params_.greedy() ? p_[0].argmax() : sample(p_[0], rng_);
  stats_.verify_seconds += seconds_since(t0);
  ++stats_.baseline_steps;
  stats_.log.push_back(RoundLog{0, 0, 1, {entropy(p_[0])}});
  commit(token);
  // Target now holds t[0..n) = all but the new pending token; the draft (if any) is unchanged and
  // still a committed prefix.
  return 1;
}

int32_t SpeculativeDecoder::step() {
  if (done() || target_full()) return 0;
  const int32_t g = effective_gamma();
  if (g == 0) return step_baseline();

  const auto n = static_cast<int32_t>(tokens_.size());
  const int32_t v = target_.n_vocab();
  const bool greedy = params_.greedy();
  if (q_.size() < static_cast<size_t>(g)) q_.resize(static_cast<size_t>(g));
  if (p_.size() < static_cast<size_t>(g) + 1) p_.resize(static_cast<size_t>(g) + 1);
  drafts_.resize(static_cast<size_t>(g));

  // 1. Draft: catch up on committed tokens the draft has not seen (at least the pending one),
  //    then propose y_1..y_γ autoregressively.
  auto t0 = Clock::now();
  draft_->forward(std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(draft_len_)),
                  logits_);
  size_t last_row = static_cast<size_t>(n - draft_len_) - 1;
  draft_len_ = n;
  for (int32_t i = 0; i < g; ++i) {
    Distribution& q = q_[static_cast<size_t>(i)];
    make_distribution(row(logits_, v, last_row), params_, q);
    drafts_[static_cast<size_t>(i)] = greedy ? q.argmax() : sample(q, rng_);
    if (i + 1 < g) {
      draft_->forward(std::span<const int32_t>(&drafts_[static_cast<size_t>(i)], 1), logits_);
      last_row = 0;
    }
  }
  stats_.draft_seconds += seconds_since(t0);

  // 2. Verify all drafts in one target call.
  t0 = Clock::now();
  inputs_.assign(1, tokens_.back());
  inputs_.insert(inputs_.end(), drafts_.begin(), drafts_.end());
  target_.forward(inputs_, logits_);
  for (int32_t j = 0; j <= g; ++j) {
    make_distribution(row(logits_, v, static_cast<size_t>(j)), params_, p_[static_cast<size_t>(j)]);
  }
  const std::span<const Distribution> q(q_.data(), static_cast<size_t>(g));
  const std::span<const Distribution> p(p_.data(), static_cast<size_t>(g) + 1);
  const VerifyResult r = verify_(drafts_, q, p, greedy, rng_);
  stats_.verify_seconds += seconds_since(t0);

  RoundLog log{g, r.n_accepted, 0, {}};
  for (int32_t j = 0; j <= r.n_accepted && j <= g; ++j) {
    log.target_entropy.push_back(entropy(p_[static_cast<size_t>(j)]));
    if (j < g) {
      log.overlap.push_back(
          static_cast<float>(overlap(p_[static_cast<size_t>(j)], q_[static_cast<size_t>(j)])));
    }
  }
  ++stats_.rounds;
  stats_.drafted += g;
  stats_.accepted += r.n_accepted;
  ++stats_.accepted_hist[static_cast<size_t>(r.n_accepted)];

  // 3. Commit y_1..y_a then z, stopping early on the budget or a stop token.
  bool open = true;
  for (int32_t i = 0; i < r.n_accepted && open; ++i) open = commit(drafts_[static_cast<size_t>(i)]);
  if (open) commit(r.next_token);
  const auto n_new = static_cast<int32_t>(tokens_.size());
  log.emitted = n_new - n;
  stats_.log.push_back(std::move(log));

  // 4. Roll back to the protocol's invariant. The draft holds t[0..n) y_1..y_{γ-1}; of that, the
  //    committed part is t[0..n) y_1..y_min(a, γ-1), further capped by the pending-token rule.
  target_.truncate(n_new - 1);
  draft_len_ = std::min(n + std::min(r.n_accepted, g - 1), n_new - 1);
  draft_->truncate(draft_len_);
  return n_new - n;
}

void SpeculativeDecoder::run() {
  while (!done()) step();
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::None:
      return "none";
    case StopReason::MaxTokens:
      return "max_tokens";
    case StopReason::StopToken:
      return "stop_token";
    case StopReason::ContextFull:
      return "context_full";
  }
  return "?";
}

}  // namespace specdec
