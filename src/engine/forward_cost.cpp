#include "engine/forward_cost.h"

#include <chrono>
#include <ctime>

#include "common/error.h"
#include "engine/bench_stats.h"
#include "engine/model_lm.h"

namespace specdec {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

std::vector<ForwardCost> measure_forward_costs(Model& model, std::span<const int32_t> prefix,
                                               int32_t k_max, int32_t repeats, ThreadPool& pool) {
  if (prefix.empty()) fail("the verify-cost measurement needs a non-empty prefix");
  if (k_max < 1) fail("the verify-cost measurement needs k_max >= 1, got ", k_max);
  if (repeats < 1) fail("the verify-cost measurement needs repeats >= 1, got ", repeats);
  const auto n_prefix = static_cast<int32_t>(prefix.size());
  if (static_cast<int64_t>(n_prefix) + k_max > model.config().n_ctx_train) {
    fail("the verify-cost measurement needs ", n_prefix, " + ", k_max,
         " tokens, more than the model's context of ", model.config().n_ctx_train);
  }
  ModelLM lm(model, n_prefix + k_max, pool);
  lm.forward_last(prefix, nullptr);

  // The k tokens of a pass: the prefix's own tokens, recycled (token ids do not change the cost).
  std::vector<int32_t> tokens(static_cast<size_t>(k_max));
  for (int32_t i = 0; i < k_max; ++i)
    tokens[static_cast<size_t>(i)] = prefix[static_cast<size_t>(i % n_prefix)];
  std::vector<float> logits;
  struct Timing {
    double wall_ms, cpu_ms;
  };
  auto pass = [&](int32_t k) {
    const double c0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    lm.forward(std::span<const int32_t>(tokens.data(), static_cast<size_t>(k)), logits);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = thread_cpu_ms();
    lm.truncate(n_prefix);
    return Timing{std::chrono::duration<double, std::milli>(t1 - t0).count(), c1 - c0};
  };
  pass(k_max);  // warm-up: sizes every scratch buffer and pages in the weights

  std::vector<ForwardCost> costs(static_cast<size_t>(k_max));
  for (int32_t rep = 0; rep < repeats; ++rep) {
    for (int32_t j = 0; j < k_max; ++j) {
      const int32_t k = 1 + (j + rep) % k_max;
      const Timing t = pass(k);
      costs[static_cast<size_t>(k - 1)].ms.push_back(t.wall_ms);
      costs[static_cast<size_t>(k - 1)].cpu_ms.push_back(t.cpu_ms);
    }
  }
  for (int32_t k = 1; k <= k_max; ++k) {
    ForwardCost& c = costs[static_cast<size_t>(k - 1)];
    c.k = k;
    c.median_ms = median(c.ms);
    c.median_cpu_ms = median(c.cpu_ms);
  }
  for (ForwardCost& c : costs) {
    c.ratio = costs[0].median_ms > 0 ? c.median_ms / costs[0].median_ms : 0;
    c.cpu_ratio = costs[0].median_cpu_ms > 0 ? c.median_cpu_ms / costs[0].median_cpu_ms : 0;
  }
  return costs;
}

}  // namespace specdec
