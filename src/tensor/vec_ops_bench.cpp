// Micro-benchmarks of attention's float kernels at a SmolLM2-like head (dim 64, 3 query heads
// per KV head) over a 400-slot context: scores and V sums one query at a time vs the
// multi-query forms, and the softmax numerator with the vectorized glibc exp vs std::exp.
#include <benchmark/benchmark.h>

#include <vector>

#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/vec_ops.h"

namespace specdec {
namespace {

constexpr int64_t kDim = 64, kSlots = 400, kGroup = 3;

using testing::random_floats;

// Arg: 0 = one query per call, 1 = the multi-query form.
void BM_AttentionScores(benchmark::State& state) {
  const std::vector<float> k = random_floats(kSlots * kDim, 1), q = random_floats(kGroup * kDim, 2);
  std::vector<float> out(kGroup * kSlots);
  for (auto _ : state) {
    if (state.range(0) == 0) {
      for (int64_t j = 0; j < kGroup; ++j) {
        dot_rows_f32(q.data() + j * kDim, k.data(), kDim, kSlots, kDim, out.data() + j * kSlots);
      }
    } else {
      dot_rows_multi_f32(q.data(), kDim, kGroup, k.data(), kDim, kSlots, kDim, out.data(), kSlots);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kGroup * kSlots);
}
BENCHMARK(BM_AttentionScores)->Arg(0)->Arg(1);

void BM_AttentionValues(benchmark::State& state) {
  const std::vector<float> v = random_floats(kSlots * kDim, 3),
                           p = random_floats(kGroup * kSlots, 4);
  std::vector<float> out(kGroup * kDim);
  for (auto _ : state) {
    if (state.range(0) == 0) {
      for (int64_t j = 0; j < kGroup; ++j) {
        weighted_sum_rows_f32(p.data() + j * kSlots, v.data(), kDim, kSlots, kDim,
                              out.data() + j * kDim);
      }
    } else {
      weighted_sum_rows_multi_f32(p.data(), kSlots, kGroup, v.data(), kDim, kSlots, kDim,
                                  out.data(), kDim);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kGroup * kSlots);
}
BENCHMARK(BM_AttentionValues)->Arg(0)->Arg(1);

// Arg: 0 = scalar (std::exp), 1 = AVX2 (skipped without it).
void BM_SoftmaxExp(benchmark::State& state) {
  if (state.range(0) == 1 && !cpu_has_avx2()) {
    state.SkipWithError("no AVX2");
    return;
  }
  const std::vector<float> scores = random_floats(kSlots, 5);
  std::vector<float> row(kSlots);
  for (auto _ : state) {
    row = scores;
    const float sum = state.range(0) == 0 ? softmax_exp_f32_scalar(row.data(), kSlots, 8.0f)
                                          : softmax_exp_f32_avx2(row.data(), kSlots, 8.0f);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * kSlots);
}
BENCHMARK(BM_SoftmaxExp)->Arg(0)->Arg(1);

}  // namespace
}  // namespace specdec
