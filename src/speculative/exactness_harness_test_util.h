// Test-only helpers shared by the exactness tests of the speculative loop (draft model and prompt
// lookup alike): sampling settings, the target's exact joint distribution over continuations by
// enumeration, the empirical counts of the same continuations from the decoder (for a
// chi-square fit), and target-only greedy decoding by hand.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "sampling/distribution.h"
#include "speculative/drafter.h"
#include "speculative/fake_lm.h"
#include "speculative/speculative_decoder.h"

namespace specdec::testing {

inline SamplingParams params(float temperature, float top_p = 1.0f, int top_k = 0,
                             float min_p = 0.0f) {
  SamplingParams sp;
  sp.temperature = temperature;
  sp.top_p = top_p;
  sp.top_k = top_k;
  sp.min_p = min_p;
  return sp;
}

// Index of a continuation among all vocab^length of them (base-vocab digits, first token most
// significant): the cell both exact_joint and joint_counts use.
inline size_t sequence_index(std::span<const int32_t> tokens, int32_t vocab) {
  size_t index = 0;
  for (int32_t t : tokens) index = index * static_cast<size_t>(vocab) + static_cast<size_t>(t);
  return index;
}

// A target and a draft that agrees with it only partly (acceptance ~0.6-0.8 at noise 1.5): the
// pair most exactness tests run on.
struct Models {
  explicit Models(int32_t vocab, float noise = 1.5f, int32_t target_cap = 1 << 20,
                  int32_t draft_cap = 1 << 20)
      : target(vocab, 1, 2.0f, target_cap), draft(vocab, 2, 0.0f, draft_cap, &target, noise) {}
  FakeLM target;
  FakeLM draft;
};

// P(continuation = x_1..x_L | prompt) for every sequence (sequence_index) when the next-token
// logits after a context are logits_of(context) (a vector of v).
inline std::vector<double> exact_joint_of(
    const std::function<std::vector<float>(const std::vector<int32_t>&)>& logits_of, int32_t v,
    const SamplingParams& sp, const std::vector<int32_t>& prompt, int length) {
  std::vector<double> out(static_cast<size_t>(std::pow(v, length)), 0.0);
  const auto recurse = [&](auto&& self, std::vector<int32_t>& ctx, int depth, double prob,
                           size_t index) -> void {
    if (depth == length) {
      out[index] = prob;
      return;
    }
    Distribution d;  // per level: the recursion below must not overwrite it
    make_distribution(logits_of(ctx), sp, d);
    for (size_t i = 0; i < d.size(); ++i) {
      ctx.push_back(d.ids[i]);
      self(self, ctx, depth + 1, prob * d.probs[i],
           index * static_cast<size_t>(v) + static_cast<size_t>(d.ids[i]));
      ctx.pop_back();
    }
  };
  std::vector<int32_t> ctx = prompt;
  recurse(recurse, ctx, 0, 1.0, 0);
  return out;
}

// The same under the target's own logits.
inline std::vector<double> exact_joint(const FakeLM& target, const SamplingParams& sp,
                                       const std::vector<int32_t>& prompt, int length) {
  return exact_joint_of(
      [&target](const std::vector<int32_t>& ctx) { return target.logits_for(ctx); },
      target.n_vocab(), sp, prompt, length);
}

// How often the decoder produced each continuation of `length` tokens in `trials` runs from the
// prompt (one random stream across trials, as a server would run them). after_trial sees each
// trial's statistics.
inline std::vector<int64_t> joint_counts(
    SpeculativeDecoder& dec, int32_t vocab, const std::vector<int32_t>& prompt, int length,
    int trials, const std::function<void(const DecodeStats&)>& after_trial = {}) {
  std::vector<int64_t> counts(static_cast<size_t>(std::pow(vocab, length)), 0);
  for (int t = 0; t < trials; ++t) {
    dec.start(prompt, length);
    dec.run();
    ++counts[sequence_index(dec.generated(), vocab)];
    if (after_trial) after_trial(dec.stats());
  }
  return counts;
}

// Target-only greedy decoding by hand when the next-token logits after a context are
// logits_of(context) (with penalties or a constraint written out): argmax with ties to the
// lowest id at each step.
inline std::vector<int32_t> greedy_reference_of(
    const std::function<std::vector<float>(const std::vector<int32_t>&)>& logits_of,
    std::vector<int32_t> ctx, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> l = logits_of(ctx);
    const auto best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    out.push_back(best);
    ctx.push_back(best);
  }
  return out;
}

// The same under the target's own logits.
inline std::vector<int32_t> greedy_reference(const FakeLM& target, std::vector<int32_t> ctx,
                                             int n) {
  return greedy_reference_of(
      [&target](const std::vector<int32_t>& c) { return target.logits_for(c); }, std::move(ctx), n);
}

// For several prompts over the models' 7-token vocabulary: speculative decoding with a model
// drafter at these (greedy) settings, γ 4, 20 tokens, gives the target's own greedy text.
// Returns the number of prompts where it did not (each also reported as a failure).
inline int expect_greedy_is_target_greedy(Models& m, const SamplingParams& sp, int trials) {
  int wrong = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::vector<int32_t> prompt{trial % 7, (trial * 5) % 7, 3};
    ModelDrafter drafter(m.draft);
    Rng rng(static_cast<uint64_t>(61 + trial));
    SpeculativeDecoder dec(m.target, drafter, sp, 4, rng);
    dec.start(prompt, 20);
    dec.run();
    const std::vector<int32_t> got(dec.generated().begin(), dec.generated().end());
    const bool same = got == greedy_reference(m.target, prompt, 20);
    EXPECT_TRUE(same) << "trial " << trial;
    wrong += same ? 0 : 1;
  }
  return wrong;
}

}  // namespace specdec::testing
