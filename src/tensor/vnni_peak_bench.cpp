// The issue rate of vpdpbusd alone: 12 independent accumulator chains on 512-bit vectors (the
// 16-row packed kernels' instruction) and on 256-bit ones (the 8-row kernels' and AVX-VNNI's).
// Its multiply-adds per second are the ceiling of the packed kernels on this CPU, against which
// a prefill's rate is read (docs/benchmarks.md: a 1.5B prefill row is 1.31 G multiply-adds).
//   build/bench_tensor --benchmark_filter=Vpdpbusd
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "tensor/cpu_features.h"

namespace specdec {
namespace {

constexpr int kChains = 12;    // independent accumulators: more than latency x ports needs
constexpr int kRounds = 1000;  // instructions per chain per benchmark iteration

// One round is one asm block over kChains named register variables. An earlier form, an array
// of accumulators with an empty asm per element, kept the array on the stack: every vpdpbusd
// came with a load and a store, and the loop measured the store port instead (one 512-bit or
// two 256-bit stores a cycle), which read 512-bit vpdpbusd at 0.4x the 256-bit issue rate.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void run512(benchmark::State& state) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  __m512i x0 = _mm512_set1_epi32(0), x1 = _mm512_set1_epi32(1), x2 = _mm512_set1_epi32(2),
          x3 = _mm512_set1_epi32(3), x4 = _mm512_set1_epi32(4), x5 = _mm512_set1_epi32(5),
          x6 = _mm512_set1_epi32(6), x7 = _mm512_set1_epi32(7), x8 = _mm512_set1_epi32(8),
          x9 = _mm512_set1_epi32(9), x10 = _mm512_set1_epi32(10), x11 = _mm512_set1_epi32(11);
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
      asm volatile(
          "vpdpbusd %[b], %[a], %[x0]\n\t"
          "vpdpbusd %[b], %[a], %[x1]\n\t"
          "vpdpbusd %[b], %[a], %[x2]\n\t"
          "vpdpbusd %[b], %[a], %[x3]\n\t"
          "vpdpbusd %[b], %[a], %[x4]\n\t"
          "vpdpbusd %[b], %[a], %[x5]\n\t"
          "vpdpbusd %[b], %[a], %[x6]\n\t"
          "vpdpbusd %[b], %[a], %[x7]\n\t"
          "vpdpbusd %[b], %[a], %[x8]\n\t"
          "vpdpbusd %[b], %[a], %[x9]\n\t"
          "vpdpbusd %[b], %[a], %[x10]\n\t"
          "vpdpbusd %[b], %[a], %[x11]\n\t"
          : [x0] "+v"(x0), [x1] "+v"(x1), [x2] "+v"(x2), [x3] "+v"(x3), [x4] "+v"(x4),
            [x5] "+v"(x5), [x6] "+v"(x6), [x7] "+v"(x7), [x8] "+v"(x8), [x9] "+v"(x9),
            [x10] "+v"(x10), [x11] "+v"(x11)
          : [a] "v"(a), [b] "v"(b));
    }
  }
  __m512i sum = x0;
  sum = _mm512_add_epi32(sum, x1);
  sum = _mm512_add_epi32(sum, x2);
  sum = _mm512_add_epi32(sum, x3);
  sum = _mm512_add_epi32(sum, x4);
  sum = _mm512_add_epi32(sum, x5);
  sum = _mm512_add_epi32(sum, x6);
  sum = _mm512_add_epi32(sum, x7);
  sum = _mm512_add_epi32(sum, x8);
  sum = _mm512_add_epi32(sum, x9);
  sum = _mm512_add_epi32(sum, x10);
  sum = _mm512_add_epi32(sum, x11);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  benchmark::DoNotOptimize(lanes[0]);
  state.counters["MACs"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kRounds * kChains * 64,
                         benchmark::Counter::kIsRate);
}

__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void run256(benchmark::State& state) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  __m256i x0 = _mm256_set1_epi32(0), x1 = _mm256_set1_epi32(1), x2 = _mm256_set1_epi32(2),
          x3 = _mm256_set1_epi32(3), x4 = _mm256_set1_epi32(4), x5 = _mm256_set1_epi32(5),
          x6 = _mm256_set1_epi32(6), x7 = _mm256_set1_epi32(7), x8 = _mm256_set1_epi32(8),
          x9 = _mm256_set1_epi32(9), x10 = _mm256_set1_epi32(10), x11 = _mm256_set1_epi32(11);
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
      asm volatile(
          "vpdpbusd %[b], %[a], %[x0]\n\t"
          "vpdpbusd %[b], %[a], %[x1]\n\t"
          "vpdpbusd %[b], %[a], %[x2]\n\t"
          "vpdpbusd %[b], %[a], %[x3]\n\t"
          "vpdpbusd %[b], %[a], %[x4]\n\t"
          "vpdpbusd %[b], %[a], %[x5]\n\t"
          "vpdpbusd %[b], %[a], %[x6]\n\t"
          "vpdpbusd %[b], %[a], %[x7]\n\t"
          "vpdpbusd %[b], %[a], %[x8]\n\t"
          "vpdpbusd %[b], %[a], %[x9]\n\t"
          "vpdpbusd %[b], %[a], %[x10]\n\t"
          "vpdpbusd %[b], %[a], %[x11]\n\t"
          : [x0] "+v"(x0), [x1] "+v"(x1), [x2] "+v"(x2), [x3] "+v"(x3), [x4] "+v"(x4),
            [x5] "+v"(x5), [x6] "+v"(x6), [x7] "+v"(x7), [x8] "+v"(x8), [x9] "+v"(x9),
            [x10] "+v"(x10), [x11] "+v"(x11)
          : [a] "v"(a), [b] "v"(b));
    }
  }
  __m256i sum = x0;
  sum = _mm256_add_epi32(sum, x1);
  sum = _mm256_add_epi32(sum, x2);
  sum = _mm256_add_epi32(sum, x3);
  sum = _mm256_add_epi32(sum, x4);
  sum = _mm256_add_epi32(sum, x5);
  sum = _mm256_add_epi32(sum, x6);
  sum = _mm256_add_epi32(sum, x7);
  sum = _mm256_add_epi32(sum, x8);
  sum = _mm256_add_epi32(sum, x9);
  sum = _mm256_add_epi32(sum, x10);
  sum = _mm256_add_epi32(sum, x11);
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
