#include "speculative/drafter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "sampling/mirostat.h"
#include "tensor/vec_ops.h"

namespace specdec {

namespace {

std::span<const float> row(const std::vector<float>& logits, int32_t n_vocab, size_t i) {
  return std::span<const float>(logits).subspan(i * static_cast<size_t>(n_vocab),
                                                static_cast<size_t>(n_vocab));
}

// The draft's confidence in its next token: q's top probability; for greedy drafting, whose q is
// one-hot, the top probability of the unfiltered softmax at T = 1. The exps go through the
// vectorized exp_shifted_scaled_f64 (std::exp's bits, 2.2x faster than a scalar loop over a
// 152k vocabulary: 0.40 vs 0.89 ms per drafted token, a 12.5 ms draft step on the Qwen pair).
double confidence(std::span<const float> logits, const Distribution& q, bool greedy,
                  std::vector<double>& scratch) {
  if (!greedy) return q.probs.empty() ? 0.0 : q.probs.front();
  float mx = -std::numeric_limits<float>::infinity();
  for (float l : logits) mx = std::max(mx, l);
  scratch.resize(logits.size());
  exp_shifted_scaled_f64(logits.data(), static_cast<int64_t>(logits.size()), mx, 1.0,
                         scratch.data());
  double sum = 0;
  for (double e : scratch) sum += e;
  return sum > 0 ? 1.0 / sum : 0.0;
}

// Distribution entries are sorted by descending probability with ties by ascending id; after
// column ids are mapped to vocabulary ids, only the order within runs of equal probability can
// be off (O(n) to find the runs; they are short).
void restore_tie_order(Distribution& q) {
  const size_t n = q.ids.size();
  for (size_t b = 0; b < n;) {
    size_t e = b + 1;
    while (e < n && q.probs[e] == q.probs[b]) ++e;
    if (e - b > 1)
      std::sort(q.ids.begin() + static_cast<std::ptrdiff_t>(b),
                q.ids.begin() + static_cast<std::ptrdiff_t>(e));
    b = e;
  }
}

}  // namespace

std::vector<double> verify_row_costs(const DraftLengthParams& p, int32_t n) {
  std::vector<double> out(static_cast<size_t>(std::max(0, n)), p.verify_cost);
  if (p.pass_costs.empty() || n <= 0) return out;
  // Points (k, V(k)) for k = 1..K; the lower hull by a monotone chain from the left.
  std::vector<double> v = {1.0};
  for (float c : p.pass_costs) v.push_back(c);
  std::vector<size_t> hull;
  for (size_t k = 0; k < v.size(); ++k) {
    while (hull.size() >= 2) {
      const size_t a = hull[hull.size() - 2], b = hull.back();
      // Drop b when it lies on or above the segment from a to k.
      if ((v[b] - v[a]) * static_cast<double>(k - a) >=
          (v[k] - v[a]) * static_cast<double>(b - a)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(k);
  }
  // Draft i's row takes the pass from i + 1 to i + 2 tokens: hull points i to i + 1 (0-based).
  size_t seg = 0;
  double slope = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    const auto x = static_cast<size_t>(i);
    while (seg + 1 < hull.size() && hull[seg + 1] <= x) ++seg;
    if (seg + 1 < hull.size()) {
      const size_t a = hull[seg], b = hull[seg + 1];
      slope = (v[b] - v[a]) / static_cast<double>(b - a);
    }  // past the line's end: its last slope (0 when it has one point)
    out[x] = std::max(0.0, slope);
  }
  return out;
}

double ModelDrafter::row_cost(int32_t i) {
  if (static_cast<size_t>(i) >= row_cost_.size()) row_cost_ = verify_row_costs(length_, 2 * i + 8);
  return row_cost_[static_cast<size_t>(i)];
}

void ModelDrafter::start(std::span<const int32_t> prompt, int32_t n_cached) {
  if (n_cached < 0) fail("speculative decoder: invalid cached prefix length ", n_cached);
  // The draft's cache may hold less of the prompt than the target's (a slot whose earlier
  // request did not use the draft, or read its prompt lazily): it keeps what it has and reads
  // the rest, now or at the first proposal.
  // It holds t[base_..base_ + length) of the earlier text (base_ > 0: re-based by a window, see
  // set_cache_base); what the new prompt shares of that stays, at the same positions.
  // Without a window the draft reads the whole text: a re-based cache is no use then.
  const int32_t kept_end = std::min(n_cached, base_ + draft_.length());
  if (kept_end > base_ && (base_ == 0 || window_ > 0)) {
    draft_.truncate(kept_end - base_);
    draft_len_ = kept_end;
  } else {
    draft_.truncate(0);
    draft_len_ = 0;
    base_ = 0;
  }
  if (lazy_start_) return;
  // The draft reads the prompt now, like the target (all but its last token, which goes with
  // the first round): a prompt is part of prompt processing, as in llama.cpp's speculative
  // example, not of the first round's drafting. Chunking cannot change the cache it leaves
  // (batch invariance), so where this happens changes timing only.
  const auto n = static_cast<int32_t>(prompt.size());
  if (draft_len_ < n - 1) read(prompt, n - 1, nullptr);
}

void ModelDrafter::read(std::span<const int32_t> text, int32_t end, std::vector<float>* logits) {
  if (window_ > 0 && end - draft_len_ > window_) {
    base_ = end - window_;
    draft_.truncate(0);
    draft_len_ = base_;
  }
  draft_.forward_last(
      text.subspan(static_cast<size_t>(draft_len_), static_cast<size_t>(end - draft_len_)), logits);
  draft_len_ = end;
}

int32_t ModelDrafter::max_drafts(int32_t n) const {
  // The draft writes positions up to n+γ-2 (it never runs y_γ), which needs n+γ-1 <= capacity;
  // its positions count from base_.
  return std::max(0, draft_.capacity() - (n - base_) + 1);
}

int32_t ModelDrafter::propose(std::span<const int32_t> committed, int32_t gamma,
                              const SamplingParams& params, Rng& rng, std::vector<int32_t>& drafts,
                              std::vector<Distribution>& q) {
  const auto n = static_cast<int32_t>(committed.size());
  const int32_t v = draft_.n_vocab();
  // With a vocabulary subset, q_i is built over the subset's logits and its ids mapped back to
  // vocabulary ids; a frequency-ordered head's columns are not in id order, so runs of equal
  // probability are then put back in id order (Distribution's tie order).
  const std::span<const int32_t> subset = draft_.logit_ids();
  const int32_t width = draft_.logit_width();
  if (drafts.size() < static_cast<size_t>(gamma)) drafts.resize(static_cast<size_t>(gamma));
  if (q.size() < static_cast<size_t>(gamma)) q.resize(static_cast<size_t>(gamma));
  if (confidence_.size() < static_cast<size_t>(gamma))
    confidence_.resize(static_cast<size_t>(gamma));
  // Catch up on committed tokens the draft has not seen (at least the pending one), then propose
  // y_1..y_γ autoregressively. Draft cache afterwards: t[0..n) y_1..y_{γ-1}.
  read(committed, n, &logits_);
  size_t last_row = 0;
  const bool greedy = params.greedy();
  // Mirostat's state moves with each draft as it would with the text (sampling/mirostat.h), so
  // that q_i resembles the target's row i, which is built at the mu the drafts before it leave.
  SamplingParams row_params = params;
  double all_pass = 1.0;  // adaptive: estimated P(drafts 1..i all accepted)
  for (int32_t i = 0; i < gamma; ++i) {
    Distribution& qi = q[static_cast<size_t>(i)];
    std::span<const float> li = row(logits_, width, last_row);
    const bool penalize = penalties_ != nullptr && penalties_->params().active();
    if (penalize || constraint_ != nullptr) {
      // q_i follows the committed text and drafts y_1..y_{i-1}, like the target's row i.
      const std::span<const int32_t> before(drafts.data(), static_cast<size_t>(i));
      penalized_.assign(li.begin(), li.end());
      if (penalize) penalties_->apply(penalized_, before, subset);
      // Where the rule leaves the draft's columns nothing, the round ends: a decision made from
      // q_i's support, i.e. from the past alone, like the adaptive length's.
      if (constraint_ != nullptr && !constraint_->apply(penalized_, before, subset, greedy)) {
        return i;
      }
      li = penalized_;
    }
    make_distribution(li, row_params, qi);
    if (!subset.empty()) {
      for (int32_t& id : qi.ids) id = subset[static_cast<size_t>(id)];
      qi.n_vocab = v;
      restore_tie_order(qi);
    }
    if (length_.adaptive || length_.p_min > 0) {
      // Decided from q_i before y_i is drawn (see DraftLengthParams).
      const double conf = confidence(li, qi, greedy, exp_scratch_);
      const bool may_stop = i >= length_.min_drafts;
      if (may_stop && conf < length_.p_min) return i;
      if (length_.adaptive) {
        confidence_[static_cast<size_t>(i)] = conf;
        all_pass *= length_.calibrate ? calibration_.estimate(conf) : conf;
        if (may_stop && all_pass < row_cost(i)) return i;
      }
    }
    drafts[static_cast<size_t>(i)] = greedy ? qi.argmax() : sample(qi, rng);
    if (params.mirostat_active()) {
      row_params.mirostat_mu =
          mirostat_next_mu(row_params, qi.prob(drafts[static_cast<size_t>(i)]));
    }
    if (length_.adaptive && i + 1 < gamma && i + 1 >= length_.min_drafts &&
        all_pass * accept_rate_ < length_.draft_cost + row_cost(i + 1)) {
      return i + 1;
    }
    if (i + 1 < gamma) {
      draft_.forward(std::span<const int32_t>(&drafts[static_cast<size_t>(i)], 1), logits_);
      last_row = 0;
    }
  }
  return gamma;
}

void ModelDrafter::finish_round(std::span<const int32_t> committed, int32_t n_before, int32_t m,
                                int32_t accepted) {
  // The draft holds t[0..n) y_1..y_{m-1}; of that, the committed part is t[0..n) y_1..y_min(a,
  // m-1), further capped by the pending-token rule (t[n'-1] is fed at the next round).
  const auto n_new = static_cast<int32_t>(committed.size());
  draft_len_ = std::min(n_before + std::min(accepted, m - 1), n_new - 1);
  // Per-draft acceptance, smoothed over rounds: a round that stops at its first rejection tested
  // min(accepted + 1, m) drafts.
  const int32_t tested = std::min(accepted + 1, m);
  if (length_.adaptive && length_.calibrate) {
    for (int32_t j = 0; j < tested; ++j) {  // tested <= m <= gamma <= confidence_.size()
      calibration_.observe(confidence_[static_cast<size_t>(j)], j < accepted);
    }
  }
  if (tested > 0) {
    constexpr double kRate = 0.1;
    accept_rate_ += kRate * (static_cast<double>(accepted) / tested - accept_rate_);
  }
  draft_.truncate(draft_len_ - base_);
}

void ModelDrafter::discard_round(std::span<const int32_t> /*committed*/, int32_t /*n_before*/,
                                 int32_t /*m*/) {
  // propose() read t[..n_before) (draft_len_ = n_before) and ran y_1..y_{m-1} after it: those
  // rows go. The plain step then commits one token, so d = n_before keeps d <= n' - 1.
  draft_.truncate(draft_len_ - base_);
}

}  // namespace specdec
