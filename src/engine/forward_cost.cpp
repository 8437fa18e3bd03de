#include "engine/forward_cost.h"

#include <chrono>
#include <ctime>
#include <memory>

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

void check_arguments(const Model& model, std::span<const int32_t> prefix, int32_t k_max,
                     int32_t repeats) {
  if (prefix.empty()) fail("the verify-cost measurement needs a non-empty prefix");
  if (k_max < 1) fail("the verify-cost measurement needs k_max >= 1, got ", k_max);
  if (repeats < 1) fail("the verify-cost measurement needs repeats >= 1, got ", repeats);
  if (static_cast<int64_t>(prefix.size()) + k_max > model.config().n_ctx_train) {
    fail("the verify-cost measurement needs ", prefix.size(), " + ", k_max,
         " tokens, more than the model's context of ", model.config().n_ctx_train);
  }
}

// A model with the prefix in its cache, timing passes of up to k_max tokens on top of it.
class TimedPasses {
 public:
  TimedPasses(Model& model, std::span<const int32_t> prefix, int32_t k_max, ThreadPool& pool,
              KvTypes kv_types)
      : lm_(model, static_cast<int32_t>(prefix.size()) + k_max, pool, kv_types),
        n_prefix_(static_cast<int32_t>(prefix.size())),
        tokens_(static_cast<size_t>(k_max)) {
    lm_.forward_last(prefix, nullptr);
    // The k tokens of a pass: the prefix's own, recycled (token ids do not change the cost).
    for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = prefix[i % prefix.size()];
  }
  void set_vocab(const std::optional<VocabSubset>& vocab) { lm_.set_vocab_subset(vocab); }

  struct Timing {
    double wall_ms, cpu_ms;
  };
  Timing pass(int32_t k) {
    const double c0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    lm_.forward(std::span<const int32_t>(tokens_.data(), static_cast<size_t>(k)), logits_);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = thread_cpu_ms();
    lm_.truncate(n_prefix_);
    return Timing{std::chrono::duration<double, std::milli>(t1 - t0).count(), c1 - c0};
  }

 private:
  ModelLM lm_;
  int32_t n_prefix_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
};

void record(ForwardCost& c, const TimedPasses::Timing& t) {
  c.ms.push_back(t.wall_ms);
  c.cpu_ms.push_back(t.cpu_ms);
}

// Medians, and ratios to the first entry's.
void summarize(std::vector<ForwardCost>& costs) {
  for (ForwardCost& c : costs) {
    c.median_ms = median(c.ms);
    c.median_cpu_ms = median(c.cpu_ms);
  }
  for (ForwardCost& c : costs) {
    c.ratio = costs[0].median_ms > 0 ? c.median_ms / costs[0].median_ms : 0;
    c.cpu_ratio = costs[0].median_cpu_ms > 0 ? c.median_cpu_ms / costs[0].median_cpu_ms : 0;
  }
}

}  // namespace

std::vector<ForwardCost> measure_forward_costs(Model& model, std::span<const int32_t> prefix,
                                               int32_t k_max, int32_t repeats, ThreadPool& pool,
                                               KvTypes kv_types) {
  check_arguments(model, prefix, k_max, repeats);
  TimedPasses passes(model, prefix, k_max, pool, kv_types);
  passes.pass(k_max);  // warm-up: sizes every scratch buffer and pages in the weights

  std::vector<ForwardCost> costs(static_cast<size_t>(k_max));
  for (int32_t k = 1; k <= k_max; ++k) costs[static_cast<size_t>(k - 1)].k = k;
  for (int32_t rep = 0; rep < repeats; ++rep) {
    for (int32_t j = 0; j < k_max; ++j) {
      const int32_t k = 1 + (j + rep) % k_max;
      record(costs[static_cast<size_t>(k - 1)], passes.pass(k));
    }
  }
  summarize(costs);
  return costs;
}

std::vector<ForwardCost> measure_step_costs(std::span<const StepSubject> subjects,
                                            std::span<const int32_t> prefix, int32_t repeats,
                                            ThreadPool& pool) {
  if (subjects.empty()) fail("the step-cost measurement needs at least one model");
  std::vector<std::unique_ptr<TimedPasses>> passes;
  for (const StepSubject& s : subjects) {
    if (s.model == nullptr) fail("the step-cost measurement got no model");
    check_arguments(*s.model, prefix, 1, repeats);
    passes.push_back(std::make_unique<TimedPasses>(*s.model, prefix, 1, pool, s.kv_types));
    passes.back()->set_vocab(s.vocab);
    passes.back()->pass(1);  // warm-up
  }
  const auto n = static_cast<int64_t>(subjects.size());
  std::vector<ForwardCost> costs(subjects.size());
  for (ForwardCost& c : costs) c.k = 1;
  for (int32_t rep = 0; rep < repeats; ++rep) {
    for (int64_t j = 0; j < n; ++j) {
      const auto i = static_cast<size_t>((j + rep) % n);
      record(costs[i], passes[i]->pass(1));
    }
  }
  summarize(costs);
  return costs;
}

}  // namespace specdec
