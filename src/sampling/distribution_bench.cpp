// Micro-benchmarks: building the sampled distribution from a row of logits, per vocabulary size
// (SmolLM2's 49152, Gemma 3's 262144) and filter setting. At T > 0 this runs once per generated
// token and once per verified position, so it is part of every speculative round.
// Run: bench_sampling
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sampling/distribution.h"

namespace specdec {
namespace {

// Logits shaped like a language model's: a broad normal floor and a few dozen candidates well
// above it, so that top-p 0.9 keeps a handful to a few dozen ids.
std::vector<float> lm_like_logits(int32_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> floor(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (float& l : logits) l = floor(rng);
  std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
  for (int i = 0; i < 40; ++i) logits[static_cast<size_t>(pick(rng))] += 14.0f - 0.2f * i;
  return logits;
}

// args: vocabulary size, setting (0: T 0.7 top-p 0.9 only; 1: llama.cpp's defaults, top-k 40,
// top-p 0.95, min-p 0.05; 2: greedy; 3 and 4: Mirostat 1 and 2 at mu 10, their start at tau 5;
// 5 and 6: 0 and 1 with the temperature last, llama.cpp's order).
void BM_MakeDistribution(benchmark::State& state) {
  const auto n_vocab = static_cast<int32_t>(state.range(0));
  std::vector<std::vector<float>> rows;
  for (uint32_t s = 0; s < 8; ++s) rows.push_back(lm_like_logits(n_vocab, s + 1));
  SamplingParams params;
  params.temperature = 0.7f;
  const int64_t setting = state.range(1) >= 5 ? state.range(1) - 5 : state.range(1);
  params.temperature_last = state.range(1) >= 5;
  if (setting == 0) {
    params.top_k = 0;
    params.top_p = 0.9f;
    params.min_p = 0.0f;
  }
  if (setting == 2) params.temperature = 0.0f;
  if (setting >= 3) {
    params.mirostat = static_cast<int>(setting) - 2;
    params.mirostat_mu = 10.0f;
  }
  Distribution dist;
  size_t i = 0, support = 0;
  for (auto _ : state) {
    make_distribution(rows[i++ % rows.size()], params, dist);
    support += dist.size();
    benchmark::DoNotOptimize(dist.probs.data());
  }
  static const char* const kLabels[] = {
      "T 0.7 top-p 0.9",    "T 0.7 defaults",   "greedy",
      "T 0.7 Mirostat 1",   "T 0.7 Mirostat 2", "T 0.7 last top-p 0.9",
      "T 0.7 last defaults"};
  state.SetLabel(std::string(kLabels[state.range(1)]) + ", mean support " +
                 std::to_string(support / std::max<size_t>(1, state.iterations())));
}
BENCHMARK(BM_MakeDistribution)
    ->ArgsProduct({{49152, 151936, 262144}, {0, 1, 2, 3, 4, 5, 6}})
    ->ArgNames({"vocab", "setting"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specdec
