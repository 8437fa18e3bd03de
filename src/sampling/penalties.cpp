#include "sampling/penalties.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace specdec {

namespace {

// The distinct tokens of a round's drafts with how often each occurs (a handful at most).
std::vector<std::pair<int32_t, int32_t>> distinct_counts(std::span<const int32_t> tokens) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int32_t t : tokens) {
    auto it = std::find_if(out.begin(), out.end(), [t](const auto& e) { return e.first == t; });
    if (it == out.end()) {
      out.emplace_back(t, 1);
    } else {
      ++it->second;
    }
  }
  return out;
}

int32_t count_in(const std::vector<std::pair<int32_t, int32_t>>& counts, int32_t token) {
  for (const auto& [t, c] : counts) {
    if (t == token) return c;
  }
  return 0;
}

}  // namespace

void check_penalty_params(const PenaltyParams& p, int32_t n_vocab) {
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 10.0f)) {
    fail("repetition penalty must be in (0, 10], got ", p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    fail("presence penalty must be in [-2, 2], got ", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    fail("frequency penalty must be in [-2, 2], got ", p.frequency_penalty);
  }
  if (p.min_tokens < 0) fail("min_tokens must be >= 0, got ", p.min_tokens);
  if (p.last_n < -1) fail("the penalty window must be >= 0 tokens, or -1, got ", p.last_n);
  check_dry_params(p.dry);
  for (const DryBreaker& b : p.dry_breakers) {
    if (b.head < 0 || b.head >= n_vocab) fail("a DRY sequence breaker names token ", b.head);
    for (int32_t t : b.tail) {
      if (t < 0 || t >= n_vocab) fail("a DRY sequence breaker names token ", t);
    }
  }
  for (int32_t token : p.min_tokens_ids) {
    if (token < 0 || token >= n_vocab) {
      fail("min_tokens holds back token ", token, ", outside the vocabulary of ", n_vocab,
           " tokens");
    }
  }
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= n_vocab) {
      fail("logit bias names token ", token, ", outside the vocabulary of ", n_vocab, " tokens");
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      fail("logit bias of token ", token, " must be in [-100, 100], got ", bias);
    }
  }
}

TokenPenalties::TokenPenalties(const PenaltyParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  if (n_vocab < 1) fail("penalties: vocabulary size must be >= 1, got ", n_vocab);
  check_penalty_params(params, n_vocab);
  std::sort(params_.dry_breakers.begin(), params_.dry_breakers.end());  // dry_penalties' order
  const auto v = static_cast<size_t>(n_vocab);
  bias_.assign(v, 0.0f);
  count_.assign(v, 0);
  in_prompt_.assign(v, 0);
  listed_.assign(v, 0);
  held_back_.assign(v, 0);
  for (int32_t token : params.min_tokens_ids) held_back_[static_cast<size_t>(token)] = 1;
  // A token named twice gets the last value, as a JSON object's duplicate key would.
  for (const auto& [token, bias] : params.logit_bias) bias_[static_cast<size_t>(token)] = bias;
  for (const auto& [token, bias] : params.logit_bias) {
    if (std::find(bias_ids_.begin(), bias_ids_.end(), token) == bias_ids_.end()) {
      bias_ids_.push_back(token);
    }
  }
  reset({});
}

void TokenPenalties::list(int32_t token) {
  auto& l = listed_[static_cast<size_t>(token)];
  if (l == 0) {
    l = 1;
    ids_.push_back(token);
  }
}

void TokenPenalties::reset(std::span<const int32_t> prompt) {
  for (int32_t t : ids_) {
    const auto i = static_cast<size_t>(t);
    count_[i] = 0;
    in_prompt_[i] = 0;
    listed_[i] = 0;
  }
  ids_.clear();
  generated_ = 0;
  history_.clear();
  if (keeps_history()) {
    for (int32_t t : prompt) {
      if (t < 0 || t >= n_vocab_) fail("penalties: prompt token ", t, " outside the vocabulary");
    }
    history_.assign(prompt.begin(), prompt.end());
  }
  for (int32_t t : bias_ids_) list(t);
  // Only the repetition penalty reads the prompt; without it, its tokens need no listing. (A
  // window counts from history_ instead.)
  if (params_.repetition_penalty == 1.0f || windowed()) return;
  for (int32_t t : prompt) {
    if (t < 0 || t >= n_vocab_) fail("penalties: prompt token ", t, " outside the vocabulary");
    in_prompt_[static_cast<size_t>(t)] = 1;
    list(t);
  }
}

void TokenPenalties::add(int32_t token) {
  if (token < 0 || token >= n_vocab_) fail("penalties: token ", token, " outside the vocabulary");
  ++count_[static_cast<size_t>(token)];
  ++generated_;
  list(token);
  if (keeps_history()) history_.push_back(token);
}

bool TokenPenalties::holds_back(size_t drafted) const {
  return params_.min_tokens > 0 &&
         static_cast<int64_t>(generated_) + static_cast<int64_t>(drafted) < params_.min_tokens;
}

std::span<const int32_t> TokenPenalties::last_tokens(std::span<const int32_t> extra,
                                                     int32_t n) const {
  thread_local std::vector<int32_t> window;
  window.clear();
  const size_t total = history_.size() + extra.size();
  const size_t skip = total - std::min(total, static_cast<size_t>(std::max(n, 0)));
  if (skip < history_.size()) {
    window.insert(window.end(), history_.begin() + static_cast<ptrdiff_t>(skip), history_.end());
    window.insert(window.end(), extra.begin(), extra.end());
  } else {
    window.insert(window.end(), extra.begin() + static_cast<ptrdiff_t>(skip - history_.size()),
                  extra.end());
  }
  return window;
}

float TokenPenalties::adjusted_in_window(float logit, int32_t token, int32_t count) const {
  float l = logit + bias_[static_cast<size_t>(token)];
  if (count > 0) {
    const float rep = params_.repetition_penalty;
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    l -= params_.frequency_penalty * static_cast<float>(count);
    l -= params_.presence_penalty;
  }
  return l;
}

void TokenPenalties::apply_window(std::span<float> logits, std::span<const int32_t> extra,
                                  std::span<const int32_t> ids) const {
  // The window: the last last_n tokens of the prompt, the text and the row's drafts (llama.cpp
  // feeds its sampler the prompt too). Counted in a dense row, cleared again before returning.
  thread_local std::vector<int32_t> count;
  if (count.size() < static_cast<size_t>(n_vocab_)) count.resize(static_cast<size_t>(n_vocab_), 0);
  thread_local std::vector<int32_t> seen;  // the window's distinct tokens
  seen.clear();
  // Cleared on every way out, a throw included, so that the next row starts from zeros.
  struct ClearCounts {
    ~ClearCounts() {
      for (int32_t t : seen) count[static_cast<size_t>(t)] = 0;
    }
  } clear_counts;
  if (params_.penalties_active()) {
    for (int32_t t : last_tokens(extra, params_.last_n)) {
      if (count[static_cast<size_t>(t)]++ == 0) seen.push_back(t);
    }
  }
  const bool hold_back = holds_back(extra.size());
  if (ids.empty()) {
    for (int32_t t : bias_ids_) {
      if (count[static_cast<size_t>(t)] == 0)
        logits[static_cast<size_t>(t)] += bias_[static_cast<size_t>(t)];
    }
    for (int32_t t : seen) {
      float& l = logits[static_cast<size_t>(t)];
      l = adjusted_in_window(l, t, count[static_cast<size_t>(t)]);
    }
    if (hold_back) {
      for (int32_t t : params_.min_tokens_ids) logits[static_cast<size_t>(t)] = -INFINITY;
    }
  } else {
    for (size_t j = 0; j < ids.size(); ++j) {
      const int32_t t = ids[j];
      if (t < 0 || t >= n_vocab_) fail("penalties: token ", t, " outside the vocabulary");
      if (hold_back && held_back_[static_cast<size_t>(t)] != 0) {
        logits[j] = -INFINITY;
      } else if (count[static_cast<size_t>(t)] > 0 || bias_[static_cast<size_t>(t)] != 0.0f) {
        logits[j] = adjusted_in_window(logits[j], t, count[static_cast<size_t>(t)]);
      }
    }
  }
}

float TokenPenalties::adjusted(float logit, int32_t token, int32_t generated) const {
  const auto i = static_cast<size_t>(token);
  float l = logit + bias_[i];
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f && (in_prompt_[i] != 0 || generated > 0)) l = l > 0.0f ? l / rep : l * rep;
  if (generated > 0) {
    l -= params_.frequency_penalty * static_cast<float>(generated);
    l -= params_.presence_penalty;
  }
  return l;
}

void TokenPenalties::apply(std::span<float> logits, std::span<const int32_t> extra,
                           std::span<const int32_t> ids) const {
  if (!params_.active()) return;
  const bool full = ids.empty();
  if (full && logits.size() != static_cast<size_t>(n_vocab_)) {
    fail("penalties: a row of ", logits.size(), " logits for a vocabulary of ", n_vocab_);
  }
  if (!full && logits.size() != ids.size()) {
    fail("penalties: ", logits.size(), " logits for ", ids.size(), " token ids");
  }
  for (int32_t t : extra) {
    if (t < 0 || t >= n_vocab_) fail("penalties: token ", t, " outside the vocabulary");
  }
  // DRY alone (a common setting) skips the counting pass, which would change nothing.
  if (params_.counts_active()) apply_counts(logits, extra, ids);
  if (params_.dry.active()) apply_dry(logits, extra, ids);
}

void TokenPenalties::apply_dry(std::span<float> logits, std::span<const int32_t> extra,
                               std::span<const int32_t> ids) const {
  // The window: the last penalty_last_n tokens of the prompt, the text and the row's drafts.
  const std::span<const int32_t> window =
      last_tokens(extra, params_.dry.penalty_last_n < 0 ? PenaltyParams::kWholeText
                                                        : params_.dry.penalty_last_n);
  thread_local std::vector<std::pair<int32_t, float>> amounts;
  dry_penalties(params_.dry, params_.dry_breakers, window, amounts);
  if (amounts.empty()) return;
  if (ids.empty()) {
    for (const auto& [t, a] : amounts) logits[static_cast<size_t>(t)] -= a;
    return;
  }
  // A subset's columns: amounts is sorted by token, so each column is a binary search.
  for (size_t j = 0; j < ids.size(); ++j) {
    const auto it = std::lower_bound(amounts.begin(), amounts.end(),
                                     std::pair<int32_t, float>{ids[j], -INFINITY});
    if (it != amounts.end() && it->first == ids[j]) logits[j] -= it->second;
  }
}

void TokenPenalties::apply_counts(std::span<float> logits, std::span<const int32_t> extra,
                                  std::span<const int32_t> ids) const {
  // apply() checked the row's shape and the drafts' ids.
  if (windowed()) {
    apply_window(logits, extra, ids);
    return;
  }
  const bool full = ids.empty();
  const auto drafted = distinct_counts(extra);
  // Drafted tokens not listed yet: their only reason to be adjusted is the round itself.
  std::vector<std::pair<int32_t, int32_t>> new_only;
  for (const auto& e : drafted) {
    if (listed_[static_cast<size_t>(e.first)] == 0) new_only.push_back(e);
  }
  const auto generated = [&](int32_t t) {
    return count_[static_cast<size_t>(t)] + count_in(drafted, t);
  };
  // min_tokens: the row's position counts the round's drafts before it.
  const bool hold_back = holds_back(extra.size());
  if (full) {
    for (int32_t t : ids_) {
      float& l = logits[static_cast<size_t>(t)];
      l = adjusted(l, t, generated(t));
    }
    for (const auto& [t, c] : new_only) {
      float& l = logits[static_cast<size_t>(t)];
      l = adjusted(l, t, c);
    }
    if (hold_back) {
      for (int32_t t : params_.min_tokens_ids) logits[static_cast<size_t>(t)] = -INFINITY;
    }
    return;
  }
  for (size_t j = 0; j < ids.size(); ++j) {
    const int32_t t = ids[j];
    if (t < 0 || t >= n_vocab_) fail("penalties: token ", t, " outside the vocabulary");
    if (hold_back && held_back_[static_cast<size_t>(t)] != 0) {
      logits[j] = -INFINITY;
    } else if (listed_[static_cast<size_t>(t)] != 0) {
      logits[j] = adjusted(logits[j], t, generated(t));
    } else if (!new_only.empty()) {
      const int32_t c = count_in(new_only, t);
      if (c > 0) logits[j] = adjusted(logits[j], t, c);
    }
  }
}

}  // namespace specdec
