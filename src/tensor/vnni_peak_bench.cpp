// The issue rate of vpdpbusd alone: 24 independent accumulator chains on 512-bit vectors (the
// 16-row packed kernels' instruction) and on 256-bit ones (the 8-row kernels' and AVX-VNNI's).
// Its multiply-adds per second are the ceiling of the packed kernels on this CPU, against which
// a prefill's rate is read (docs/benchmarks.md: a 1.5B prefill row is 1.31 G multiply-adds).
//   build/bench_tensor --benchmark_filter=Vpdpbusd
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "tensor/cpu_features.h"

namespace specdec {
namespace {

constexpr int kChains = 24;    // independent accumulators: more than latency x ports needs
constexpr int kRounds = 1000;  // instructions per chain per benchmark iteration

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void run512(benchmark::State& state) {
  __m512i acc[kChains];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        asm("" : "+v"(acc[i]));  // one instruction per chain and round, in this order
      }
    }
  }
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  benchmark::DoNotOptimize(lanes[0]);
  state.counters["MACs"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kRounds * kChains * 64,
                         benchmark::Counter::kIsRate);
}

__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void run256(benchmark::State& state) {
  __m256i acc[kChains];
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) {
        acc[i] = _mm256_dpbusd_epi32(acc[i], a, b);
        asm("" : "+v"(acc[i]));
      }
    }
  }
  __m256i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  benchmark::DoNotOptimize(lanes[0]);
  state.counters["MACs"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kRounds * kChains * 32,
                         benchmark::Counter::kIsRate);
}

void BM_Vpdpbusd(benchmark::State& state) {
  if (!cpu_has_avx512_vnni()) {
    state.SkipWithError("the CPU has no AVX-512 VNNI");
    return;
  }
  if (state.range(0) == 512) {
    run512(state);
  } else {
    run256(state);
  }
}
BENCHMARK(BM_Vpdpbusd)->Arg(512)->Arg(256);

}  // namespace
}  // namespace specdec
