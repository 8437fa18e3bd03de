#include "engine/cache_ablation.h"

#include <chrono>

#include "common/error.h"
#include "engine/model_lm.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

using Clock = std::chrono::steady_clock;

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(argmax_f32(logits.data(), static_cast<int64_t>(logits.size())));
}

void check_args(std::span<const int32_t> prompt, int32_t n) {
  if (prompt.empty()) fail("the cache ablation needs a non-empty prompt");
  if (n < 1) fail("the cache ablation needs at least 1 token, got ", n);
}

}  // namespace

GreedyTiming greedy_with_cache(Model& model, std::span<const int32_t> prompt, int32_t n,
                               ThreadPool& pool) {
  check_args(prompt, n);
  ModelLM lm(model, static_cast<int32_t>(prompt.size()) + n, pool);
  GreedyTiming r;
  std::vector<float> logits;
  const auto t0 = Clock::now();
  lm.forward_last(prompt, &logits);
  r.tokens.push_back(argmax(logits));
  while (static_cast<int32_t>(r.tokens.size()) < n) {
    lm.forward(std::span<const int32_t>(&r.tokens.back(), 1), logits);
    r.tokens.push_back(argmax(logits));
  }
  r.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return r;
}

GreedyTiming greedy_without_cache(Model& model, std::span<const int32_t> prompt, int32_t n,
                                  ThreadPool& pool) {
  check_args(prompt, n);
  ModelLM lm(model, static_cast<int32_t>(prompt.size()) + n, pool);
  GreedyTiming r;
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<float> logits;
  const auto t0 = Clock::now();
  while (static_cast<int32_t>(r.tokens.size()) < n) {
    // Forget everything and recompute K/V for the whole sequence: only the last row's logits
    // are needed, which is also all a cache-less decoder uses.
    lm.truncate(0);
    lm.forward_last(sequence, &logits);
    r.tokens.push_back(argmax(logits));
    sequence.push_back(r.tokens.back());
  }
  r.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return r;
}

}  // namespace specdec
