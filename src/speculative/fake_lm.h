// Test-only: a deterministic CausalLM whose logits are a pure function of the entire context
// (every token in its cache up to and including the row's token). A cache that holds a stale or
// rejected token therefore yields different logits, so bookkeeping mistakes change the output
// distribution and the statistical tests see them. Every call is recorded for the protocol tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "speculative/causal_lm.h"

namespace specdec::testing {

class FakeLM : public CausalLM {
 public:
  struct Call {
    enum Kind { Forward, Truncate } kind;
    int32_t start;                // cache length before the call
    std::vector<int32_t> tokens;  // Forward: the tokens fed; Truncate: {new length}
  };

  // Logits in [-scale, scale] from a hash of (salt, context). With base set, the logits are
  // base's logits plus noise * own hash: a draft correlated with its target.
  FakeLM(int32_t vocab, uint64_t salt, float scale, int32_t capacity = 1 << 20,
         const FakeLM* base = nullptr, float noise = 0.0f)
      : vocab_(vocab),
        salt_(salt),
        scale_(scale),
        capacity_(capacity),
        base_(base),
        noise_(noise) {}

  int32_t n_vocab() const override { return vocab_; }
  int32_t length() const override { return static_cast<int32_t>(cache_.size()); }
  int32_t capacity() const override { return capacity_; }
  void truncate(int32_t n) override {
    if (n < 0 || n > length()) fail("FakeLM: truncate(", n, ") with length ", length());
    if (record_) calls_.push_back({Call::Truncate, length(), {n}});
    cache_.resize(static_cast<size_t>(n));
  }
  void forward(std::span<const int32_t> tokens, std::vector<float>& logits) override {
    if (tokens.empty()) fail("FakeLM: empty forward");
    if (length() + static_cast<int64_t>(tokens.size()) > capacity_) fail("FakeLM: overflow");
    if (record_) calls_.push_back({Call::Forward, length(), {tokens.begin(), tokens.end()}});
    logits.resize(tokens.size() * static_cast<size_t>(vocab_));
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab_) fail("FakeLM: bad token ", tokens[i]);
      cache_.push_back(tokens[i]);
      logits_for(cache_, logits.data() + i * static_cast<size_t>(vocab_));
    }
    ++forwards_;
  }

  // The logits after the whole context (a pure function; usable for exact enumeration).
  void logits_for(std::span<const int32_t> context, float* out) const {
    if (base_) {
      base_->logits_for(context, out);
    } else {
      std::fill(out, out + vocab_, 0.0f);
    }
    const float amp = base_ ? noise_ : scale_;
    uint64_t h = mix(salt_);
    for (int32_t t : context) h = mix(h ^ static_cast<uint64_t>(t + 1));
    const int32_t successor = context.empty() ? -1 : (context.back() + 1) % vocab_;
    for (int32_t v = 0; v < vocab_; ++v) {
      const uint64_t x = mix(h + static_cast<uint64_t>(v) * 0x9e3779b97f4a7c15ULL);
      out[v] += amp * (static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
      if (v == successor) out[v] += successor_bias_;
      if (round_) out[v] = std::round(out[v]);  // integer logits: frequent exact ties
    }
  }
  std::vector<float> logits_for(std::span<const int32_t> context) const {
    std::vector<float> out(static_cast<size_t>(vocab_));
    logits_for(context, out.data());
    return out;
  }

  const std::vector<int32_t>& cache() const { return cache_; }
  const std::vector<Call>& calls() const { return calls_; }
  void set_recording(bool on) { record_ = on; }
  void set_rounding(bool on) { round_ = on; }
  // Adds b to the logit of (last token + 1) mod vocab: the text then tends to cycle
  // 0 1 2 .. V-1 0 1 .., so it repeats itself and prompt lookup finds matches, while the rest of
  // the logits still depend on the whole context.
  void set_successor_bias(float b) { successor_bias_ = b; }
  void clear_calls() { calls_.clear(); }
  int64_t forwards() const { return forwards_; }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  int32_t vocab_;
  uint64_t salt_;
  float scale_;
  int32_t capacity_;
  const FakeLM* base_;
  float noise_;
  std::vector<int32_t> cache_;
  std::vector<Call> calls_;
  bool record_ = false;
  bool round_ = false;
  float successor_bias_ = 0.0f;
  int64_t forwards_ = 0;
};

}  // namespace specdec::testing
