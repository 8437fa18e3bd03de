#include "speculative/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.h"
#include "sampling/mirostat.h"
#include "tensor/thread_pool.h"

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

// p must be the target's whole distribution: a vocabulary subset is for drafts only.
void check_full_vocabulary(const CausalLM& target) {
  if (!target.logit_ids().empty()) {
    fail("speculative decoder: the target scores a vocabulary subset; only a draft may");
  }
}

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(CausalLM& target, CausalLM* draft,
                                       const SamplingParams& params, int32_t gamma, Rng& rng)
    : target_(target), params_(params), gamma_(gamma), rng_(rng) {
  if (gamma < 0) fail("speculative decoder: gamma must be >= 0, got ", gamma);
  check_full_vocabulary(target);
  if (draft && draft->n_vocab() != target.n_vocab()) {
    fail("speculative decoder: draft vocabulary (", draft->n_vocab(), ") differs from target's (",
         target.n_vocab(), ")");
  }
  if (draft) {
    model_drafter_ = std::make_unique<ModelDrafter>(*draft);
    drafter_ = model_drafter_.get();
    model_view_ = model_drafter_.get();
  }
}

SpeculativeDecoder::SpeculativeDecoder(CausalLM& target, Drafter& drafter,
                                       const SamplingParams& params, int32_t gamma, Rng& rng)
    : target_(target), drafter_(&drafter), params_(params), gamma_(gamma), rng_(rng) {
  if (gamma < 0) fail("speculative decoder: gamma must be >= 0, got ", gamma);
  check_full_vocabulary(target);
  model_view_ = dynamic_cast<const ModelDrafter*>(drafter_);
  if (model_view_ && model_view_->model().n_vocab() != target.n_vocab()) {
    fail("speculative decoder: draft vocabulary (", model_view_->model().n_vocab(),
         ") differs from target's (", target.n_vocab(), ")");
  }
}

void SpeculativeDecoder::start(std::span<const int32_t> prompt, int32_t max_new_tokens,
                               StopPredicate stop, int32_t n_cached) {
  if (prompt.empty()) fail("speculative decoder: empty prompt");
  const auto n = static_cast<int32_t>(prompt.size());
  if (n > target_.capacity()) {
    fail("prompt of ", n, " tokens does not fit the context of ", target_.capacity());
  }
  if (n_cached < 0 || n_cached > n - 1 || n_cached > target_.length()) {
    fail("speculative decoder: invalid cached prefix length ", n_cached);
  }
  // Before anything changes: the drafter validates n_cached against its own state and throws.
  if (drafter_) drafter_->start(prompt, n_cached);
  if (penalties_) penalties_->reset(prompt);
  if (constraint_ != nullptr) constraint_->reset();
  mirostat_mu_ = mirostat_mu_of(params_);
  tokens_.assign(prompt.begin(), prompt.end());
  origins_.clear();
  logprobs_.clear();
  prompt_len_ = prompt.size();
  max_new_ = max_new_tokens;
  generated_ = 0;
  stop_ = std::move(stop);
  stats_ = DecodeStats{};
  stats_.accepted_hist.assign(static_cast<size_t>(gamma_) + 1, 0);

  target_.truncate(n_cached);
  if (n_cached < n - 1) {
    target_.forward_last(
        prompt.subspan(static_cast<size_t>(n_cached), static_cast<size_t>(n - 1 - n_cached)),
        nullptr);
  }
  reason_ = max_new_tokens > 0 ? StopReason::None : StopReason::MaxTokens;
}

void SpeculativeDecoder::set_logprobs(int32_t top_n, bool post_sampling) {
  if (top_n < -1 || top_n > kMaxTopLogprobs) {
    fail("speculative decoder: top logprobs must be in [-1, ", kMaxTopLogprobs, "], got ", top_n);
  }
  logprobs_top_ = top_n;
  logprobs_post_sampling_ = post_sampling;
}

void SpeculativeDecoder::set_penalties(const PenaltyParams& params) {
  std::unique_ptr<TokenPenalties> penalties;
  if (params.active()) penalties = std::make_unique<TokenPenalties>(params, target_.n_vocab());
  penalties_ = std::move(penalties);
  if (drafter_) drafter_->set_penalties(penalties_.get());
}

void SpeculativeDecoder::set_constraint(TokenConstraint* constraint) {
  constraint_ = constraint;
  if (drafter_) drafter_->set_constraint(constraint);
}

std::span<const float> SpeculativeDecoder::target_row(int32_t j) {
  const int32_t v = target_.n_vocab();
  const auto raw = row(logits_, v, static_cast<size_t>(j));
  if (!penalties_ && constraint_ == nullptr) return raw;
  const size_t need = static_cast<size_t>(j + 1) * static_cast<size_t>(v);
  if (penalized_.size() < need) penalized_.resize(need);
  const std::span<float> out =
      std::span<float>(penalized_).subspan(static_cast<size_t>(j) * v, static_cast<size_t>(v));
  std::copy(raw.begin(), raw.end(), out.begin());
  const std::span<const int32_t> before(drafts_.data(), static_cast<size_t>(j));
  if (penalties_) penalties_->apply(out, before);
  if (constraint_ != nullptr && j <= live_drafts_ &&
      !constraint_->apply(out, before, {}, params_.greedy())) {
    fail("the output constraint allows no token after ", generated_ + j,
         " generated tokens (a grammar that the vocabulary cannot continue, or one that "
         "needs an end of text that min_tokens holds back)");
  }
  return out;
}

bool SpeculativeDecoder::commit(int32_t token, TokenOrigin origin, size_t row_index) {
  tokens_.push_back(token);
  if (penalties_) penalties_->add(token);
  if (constraint_ != nullptr) constraint_->add(token);
  // p_[row] is the distribution the token was emitted from, built at mirostat_mu_ after the
  // tokens committed before it (make_target_distributions).
  if (params_.mirostat_active()) {
    mirostat_mu_ = mirostat_next_mu(row_params(), p_[row_index].prob(token));
  }
  origins_.push_back(origin);
  if (logprobs_top_ >= 0) {
    logprobs_.push_back(
        logprobs_post_sampling_
            ? sampled_logprob(p_[row_index], token, logprobs_top_)
            : token_logprob(row(logits_, target_.n_vocab(), row_index), token, logprobs_top_));
  }
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
  if (!drafter_) return 0;
  const auto n = static_cast<int64_t>(tokens_.size());
  int64_t g = gamma_;
  if (gamma_limit_) g = std::min<int64_t>(g, std::max(0, gamma_limit_()));
  g = std::min<int64_t>(g, max_new_ - generated_ - 1);  // a round emits up to γ + 1 tokens
  g = std::min<int64_t>(g, target_.capacity() - n);     // verify writes positions n-1..n+γ-1
  g = std::min<int64_t>(g, drafter_->max_drafts(static_cast<int32_t>(n)));
  return static_cast<int32_t>(std::max<int64_t>(g, 0));
}

int32_t SpeculativeDecoder::step_baseline() {
  if (done() || target_full()) return 0;
  const auto t0 = Clock::now();
  p_.resize(std::max<size_t>(p_.size(), 1));
  live_drafts_ = 0;
  target_.forward(std::span<const int32_t>(&tokens_.back(), 1), logits_);
  make_distribution(target_row(0), row_params(), p_[0]);
  const int32_t token = params_.greedy() ? p_[0].argmax() : sample(p_[0], rng_);
  stats_.verify_seconds += seconds_since(t0);
  ++stats_.baseline_steps;
  stats_.log.push_back(RoundLog{0, 0, 1, {entropy(p_[0])}, {}});
  commit(token, TokenOrigin::Target, 0);
  // Target now holds t[0..n) = all but the new pending token; the drafter's state (a draft
  // model's cache) is unchanged and still a committed prefix.
  return 1;
}

int32_t SpeculativeDecoder::step() {
  if (done() || target_full()) return 0;
  const int32_t g = effective_gamma();
  const int32_t min_drafts = std::min(min_drafts_, gamma_);
  if (g == 0 || g < min_drafts) return step_baseline();

  const auto n = static_cast<int32_t>(tokens_.size());
  const bool greedy = params_.greedy();

  // 1. Draft: m <= γ proposals with their distributions.
  auto t0 = Clock::now();
  int32_t m = drafter_->propose(tokens_, g, row_params(), rng_, drafts_, q_);
  stats_.draft_seconds += seconds_since(t0);
  if (m < 0 || m > g || drafts_.size() < static_cast<size_t>(m) ||
      q_.size() < static_cast<size_t>(m)) {
    fail("speculative decoder: drafter proposed ", m, " tokens for gamma ", g);
  }
  // Drafts the constraint forbids: a target row after one follows no text the rule allows, and
  // is never used (p gives the forbidden draft probability 0, so verification stops there); the
  // rule is not applied to it. A one-hot proposal (prompt lookup, a greedy draft) is cut before
  // its first forbidden token instead, which is exact because whether to cut is then a function
  // of the past; a sampled draft's proposal is not cut (that would depend on the draw).
  live_drafts_ = m;
  if (constraint_ != nullptr && m > 0) {
    live_drafts_ = constraint_->allowed_prefix(
        std::span<const int32_t>(drafts_.data(), static_cast<size_t>(m)));
    if (live_drafts_ < m && q_[static_cast<size_t>(live_drafts_)].size() == 1) m = live_drafts_;
  }
  // Nothing proposed (prompt lookup found no match): a plain target step. It consumes the stream
  // exactly like a round with zero drafts would (one draw for the "bonus"), and is counted as a
  // baseline step, so rounds/drafted/accepted describe real speculation only.
  if (m == 0) return step_baseline();
  // Fewer one-hot drafts than --draft-min: dropped unverified, as llama-server drops a small
  // draft (see set_min_drafts for why only one-hot ones).
  const auto one_hot = [](const Distribution& q) { return q.size() == 1; };
  if (m < min_drafts && std::all_of(q_.begin(), q_.begin() + m, one_hot)) {
    drafter_->discard_round(tokens_, n, m);
    ++stats_.dropped_rounds;
    stats_.dropped_drafts += m;
    return step_baseline();
  }

  // 2. Verify all m drafts in one target call over m + 1 positions.
  t0 = Clock::now();
  if (p_.size() < static_cast<size_t>(m) + 1) p_.resize(static_cast<size_t>(m) + 1);
  const std::span<const int32_t> drafts(drafts_.data(), static_cast<size_t>(m));
  inputs_.assign(1, tokens_.back());
  inputs_.insert(inputs_.end(), drafts.begin(), drafts.end());
  target_.forward(inputs_, logits_);
  make_target_distributions(m + 1);
  const std::span<const Distribution> q(q_.data(), static_cast<size_t>(m));
  const std::span<const Distribution> p(p_.data(), static_cast<size_t>(m) + 1);
  const VerifyResult r = verify_(drafts, q, p, greedy, rng_);
  stats_.verify_seconds += seconds_since(t0);

  RoundLog log{m, r.n_accepted, 0, {}, {}};
  for (int32_t j = 0; j <= r.n_accepted && j <= m; ++j) {
    log.target_entropy.push_back(entropy(p_[static_cast<size_t>(j)]));
    if (j < m) {
      log.overlap.push_back(
          static_cast<float>(overlap(p_[static_cast<size_t>(j)], q_[static_cast<size_t>(j)])));
    }
  }
  ++stats_.rounds;
  stats_.drafted += m;
  stats_.accepted += r.n_accepted;
  ++stats_.accepted_hist[static_cast<size_t>(r.n_accepted)];

  // 3. Commit y_1..y_a then z, stopping early on the budget or a stop token.
  bool open = true;
  for (int32_t i = 0; i < r.n_accepted && open; ++i) {
    // Row i of the verify pass predicted y_{i+1}; row a predicted z.
    open = commit(drafts[static_cast<size_t>(i)], TokenOrigin::Draft, static_cast<size_t>(i));
  }
  if (open) {
    commit(r.next_token, r.bonus ? TokenOrigin::Bonus : TokenOrigin::Correction,
           static_cast<size_t>(r.n_accepted));
    ++(r.bonus ? stats_.bonus : stats_.corrections);
  }
  const auto n_new = static_cast<int32_t>(tokens_.size());
  log.emitted = n_new - n;
  stats_.log.push_back(std::move(log));

  // 4. Roll back to the protocol's invariant: the target to the committed prefix minus the
  //    pending token; the drafter drops what it computed for rejected drafts.
  target_.truncate(n_new - 1);
  drafter_->finish_round(tokens_, n, m, r.n_accepted);
  return n_new - n;
}

void SpeculativeDecoder::make_target_distributions(int32_t k) {
  // Penalized rows first, on this thread (a few dozen logits each, once the buffer holds all k
  // rows, so that no row moves); then the distributions.
  if (penalties_ || constraint_ != nullptr) {
    const size_t need = static_cast<size_t>(k) * static_cast<size_t>(target_.n_vocab());
    if (penalized_.size() < need) penalized_.resize(need);
  }
  target_rows_.resize(static_cast<size_t>(k));
  for (int32_t j = 0; j < k; ++j) target_rows_[static_cast<size_t>(j)] = target_row(j);
  if (params_.mirostat_active()) {
    // Row j is sampled at the mu that drafts y_1..y_j leave, so the rows are built in order.
    // After a draft the row before gives probability 0, the rest are never used (that draft is
    // rejected for certain); they are built at the last mu, as valid but unused distributions.
    SamplingParams row = row_params();
    for (int32_t j = 0; j < k; ++j) {
      const auto jj = static_cast<size_t>(j);
      make_distribution(target_rows_[jj], row, p_[jj]);
      const float p_draft = j + 1 < k ? p_[jj].prob(drafts_[jj]) : 0.0f;
      if (p_draft > 0.0f) row.mirostat_mu = mirostat_next_mu(row, p_draft);
    }
    return;
  }
  const auto build = [&](int64_t j) {
    make_distribution(target_rows_[static_cast<size_t>(j)], params_, p_[static_cast<size_t>(j)]);
  };
  // Greedy distributions are an argmax each: not worth a hand-off. (A one-thread pool or a
  // single position runs inline in parallel_for anyway.)
  std::unique_lock<std::mutex> guard;
  if (pool_guard_ != nullptr) guard = std::unique_lock<std::mutex>(*pool_guard_, std::try_to_lock);
  if (pool_ == nullptr || params_.greedy() || (pool_guard_ != nullptr && !guard.owns_lock())) {
    for (int32_t j = 0; j < k; ++j) build(j);
    return;
  }
  // A position whose logits are bad throws on whichever thread built it; the pool rethrows it
  // here once every task is done.
  pool_->parallel_for(k, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) build(j);
  });
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
