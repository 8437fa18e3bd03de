// Counters and per-round logs of a speculative run: what the benchmarks and the server report.
#pragma once

#include <cstdint>
#include <vector>

namespace specdec {

struct RoundLog {
  // Drafts proposed this round: m <= γ after budget/context shrinking (prompt lookup may propose
  // fewer); 0: a target-only step, including one whose drafter had nothing to propose.
  int32_t gamma = 0;
  int32_t accepted = 0;  // drafts accepted
  int32_t emitted = 0;   // tokens committed (accepted + correction/bonus, minus budget/stop cuts)
  // Entropy (nats) of the target's filtered distribution at each position the verifier looked at
  // (accepted + 1 of them, or 1 for a baseline step).
  std::vector<float> target_entropy;
  // Sum over x of min(p(x), q(x)) at each drafted position the verifier tested (accepted + 1 of
  // them, at most gamma): the probability that the rule accepts there, so the mean over
  // positions is the analytic acceptance rate that the measured one should match.
  std::vector<float> overlap;
};

struct DecodeStats {
  int64_t rounds = 0;          // speculative rounds (m >= 1 drafts)
  int64_t baseline_steps = 0;  // target-only steps (no room to draft, or nothing proposed)
  int64_t drafted = 0;         // draft tokens proposed: the sum of m over rounds
  int64_t accepted = 0;        // draft tokens accepted
  int64_t emitted = 0;         // tokens committed
  // Proposals shorter than the decoder's minimum (set_min_drafts), dropped unverified: rounds
  // and drafts, not counted in rounds or drafted (their target step is a baseline step).
  int64_t dropped_rounds = 0;
  int64_t dropped_drafts = 0;
  // Rounds whose target token was committed, by kind: a correction after a rejected draft, or a
  // bonus after all drafts were accepted (a stop token among the accepted drafts commits
  // neither). With baseline_steps and the committed accepted drafts they add up to emitted; the
  // per-token record is SpeculativeDecoder::origins().
  int64_t corrections = 0;
  int64_t bonus = 0;
  // accepted_hist[a]: rounds that accepted exactly a drafts, a = 0..γ (the configured γ).
  std::vector<int64_t> accepted_hist;
  double draft_seconds = 0;   // draft forwards + draft distributions + draft sampling
  double verify_seconds = 0;  // target forwards + target distributions + accept/reject
  std::vector<RoundLog> log;

  double acceptance_rate() const {
    return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
  // Tokens per target forward: the speedup's upper bound if drafts were free.
  double tokens_per_target_call() const {
    const int64_t calls = rounds + baseline_steps;
    return calls > 0 ? static_cast<double>(emitted) / static_cast<double>(calls) : 0.0;
  }
};

}  // namespace specdec
