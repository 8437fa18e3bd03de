// The issue rate of vpdpbusd alone: 12 independent accumulator chains on 512-bit vectors (the
// 16-row packed kernels' instruction) and on 256-bit ones (the 8-row kernels' and AVX-VNNI's).
// Its multiply-adds per second are the ceiling of the packed kernels on this CPU, against which
// a prefill's rate is read (docs/benchmarks.md: a 1.5B prefill row is 1.31 G multiply-adds).
//   build/bench_tensor --benchmark_filter=Vpdpbusd
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/cpu_features.h"

namespace specdec {
namespace {

constexpr int kChains = 12;    // independent accumulators: more than latency x ports needs
constexpr int kRounds = 1000;  // instructions per chain per benchmark iteration

// One round is one asm block over kChains named register variables. An earlier form, an array
// of accumulators with an empty asm per element, kept the array on the stack: every vpdpbusd
// came with a load and a store, and the loop measured the store port instead (one 512-bit or
// two 256-bit stores a cycle), which read 512-bit vpdpbusd at 0.4x the 256-bit issue rate.
#define SPECDEC_VNNI_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

// A vector of V (__m512i or __m256i) with every 32-bit lane v.
template <typename V>
SPECDEC_VNNI_TARGET V splat32(int32_t v) {
  int32_t lanes[sizeof(V) / 4];
  for (int32_t& l : lanes) l = v;
  V r;
  std::memcpy(&r, lanes, sizeof(V));
  return r;
}

// The asm is the same text for both widths; V makes its registers zmm or ymm.
template <typename V>
SPECDEC_VNNI_TARGET void run(benchmark::State& state) {
  const V a = splat32<V>(0x03030303), b = splat32<V>(0x05050505);  // bytes 3 and 5
  V x0 = splat32<V>(0), x1 = splat32<V>(1), x2 = splat32<V>(2), x3 = splat32<V>(3),
    x4 = splat32<V>(4), x5 = splat32<V>(5), x6 = splat32<V>(6), x7 = splat32<V>(7),
    x8 = splat32<V>(8), x9 = splat32<V>(9), x10 = splat32<V>(10), x11 = splat32<V>(11);
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
  // The lanes wrap (the instruction's own arithmetic); summed unsigned, so that adding them
  // cannot overflow a signed type.
  const V all[kChains] = {x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11};
  uint32_t sum = 0;
  for (const V& v : all) {
    uint32_t lanes[sizeof(V) / 4];
    std::memcpy(lanes, &v, sizeof(V));
    for (uint32_t l : lanes) sum += l;
  }
  benchmark::DoNotOptimize(sum);
  state.counters["MACs"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kRounds * kChains * static_cast<double>(sizeof(V)),
      benchmark::Counter::kIsRate);
}

void BM_Vpdpbusd(benchmark::State& state) {
  if (!cpu_has_avx512_vnni()) {
    state.SkipWithError("the CPU has no AVX-512 VNNI");
    return;
  }
  if (state.range(0) == 512) {
    run<__m512i>(state);
  } else {
    run<__m256i>(state);
  }
}
BENCHMARK(BM_Vpdpbusd)->Arg(512)->Arg(256);

#undef SPECDEC_VNNI_TARGET

}  // namespace
}  // namespace specdec
