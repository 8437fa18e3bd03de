// The K-quants' activation quantizer (Q8_K) on one 8,960-float row, the width of the Qwen2.5
// 1.5B's FFN down input: a prefill quantizes about 380 K floats per token this way (28 layers x
// QKV, output, gate/up and down inputs). Arg: 0 = scalar, 1 = AVX2.
//   build/bench_tensor --benchmark_filter=QuantizeActQ8K
#include <benchmark/benchmark.h>

#include <vector>

#include "support/random_floats.h"
#include "tensor/act_quant.h"
#include "tensor/cpu_features.h"
#include "tensor/ggml_type.h"

namespace specdec {
namespace {

void BM_QuantizeActQ8K(benchmark::State& state) {
  constexpr int64_t kCols = 8960;
  if (state.range(0) == 1 && !cpu_has_avx2()) {
    state.SkipWithError("the CPU has no AVX2");
    return;
  }
  const std::vector<float> x = testing::random_floats(kCols, 7);
  std::vector<uint8_t> out(row_bytes(GgmlType::Q8_K, kCols));
  for (auto _ : state) {
    if (state.range(0) == 1) {
      quantize_act_q8_k_avx2(x.data(), out.data(), kCols);
    } else {
      quantize_act_q8_k_scalar(x.data(), out.data(), kCols);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kCols);
}
BENCHMARK(BM_QuantizeActQ8K)->Arg(0)->Arg(1);

}  // namespace
}  // namespace specdec
