// Micro-benchmarks: matvec / small-k matmul per weight type at model-like shapes, and a
// streaming-read bandwidth probe to compare the achieved weight bandwidth against.
// Run e.g.: bench_tensor --benchmark_filter='Matmul/Q4_1' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/matmul.h"
#include "tensor/packed_weights.h"
#include "tensor/quantize.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

struct Shape {
  int64_t rows, cols;
};
// SmolLM2 FFN up and down, a larger FFN, SmolLM2's tied vocabulary projection, Qwen2.5-Coder
// 1.5B's FFN up and down, a matrix past the last-level cache (56 MiB at Q4_K), one that
// stays in a core's L2 (432 KiB at Q4_K: the kernels' compute speed without memory stalls),
// and the Qwen2.5-Coder 0.5B draft's FFN up, FFN down and attention q/o (a draft step is
// almost all of these small matrices, where each call's fixed cost weighs more).
const Shape kShapes[] = {{1536, 576},  {576, 1536},  {2048, 8192},  {49152, 576},
                         {8960, 1536}, {1536, 8960}, {65536, 1536}, {512, 1536},
                         {4864, 896},  {896, 4864},  {896, 896}};
const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

using testing::random_floats;

// A random matrix of one shape quantized to `type`; w points into bytes (hence no copies).
struct RandomWeights {
  RandomWeights(GgmlType type, Shape s)
      : bytes(quantize_matrix(type, random_floats(static_cast<size_t>(s.rows * s.cols), 1).data(),
                              s.rows, s.cols)),
        w{type, s.rows, s.cols, bytes.data(), row_bytes(type, s.cols)} {}
  RandomWeights(const RandomWeights&) = delete;
  RandomWeights& operator=(const RandomWeights&) = delete;

  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

// Whether the shape's rows are whole blocks of the type; skips the benchmark (with the reason)
// if not, as quantizing them would throw (576 columns are no whole number of K-quant blocks).
bool shape_fits(benchmark::State& state, GgmlType type, Shape s) {
  if (s.cols % traits(type).block_size == 0) return true;
  state.SkipWithError((std::to_string(s.cols) + " columns are not whole " +
                       std::string(type_name(type)) + " blocks")
                          .c_str());
  return false;
}

// args: shape index, k, threads, packed (use the row-interleaved copy where the type has one).
// Reports weight bytes/s (weights are read once per call).
void BM_Matmul(benchmark::State& state, GgmlType type) {
  const Shape s = kShapes[state.range(0)];
  if (!shape_fits(state, type, s)) return;
  const int64_t k = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  RandomWeights rw(type, s);
  WeightMatrix& w = rw.w;
  std::vector<uint8_t> packed;
  if (state.range(3) != 0) {
    if (packed_bytes(w) == 0) {
      state.SkipWithError("type not packable");
      return;
    }
    packed.resize(packed_bytes(w));
    pack_weights(w, packed.data());
    w.packed = packed.data();
  }
  const std::vector<float> x = random_floats(static_cast<size_t>(k * s.cols), 2);
  std::vector<float> out(static_cast<size_t>(k * s.rows));
  for (auto _ : state) {
    matmul(w, x.data(), k, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(rw.bytes.size()));
  state.SetLabel(std::string(type_name(type)) + " " + std::string(isa_name(active_isa())) +
                 (w.packed != nullptr ? " packed" : ""));
}

void matmul_args(benchmark::internal::Benchmark* b, bool pack) {
  for (int shape = 0; shape < static_cast<int>(std::size(kShapes)); ++shape) {
    for (int k : {1, 2, 3, 4, 5, 6, 7, 8, 9}) b->Args({shape, k, 1, pack});
    b->Args({shape, 1, 2, pack});
    b->Args({shape, 5, 2, pack});
  }
  b->ArgNames({"shape", "k", "threads", "packed"});
}

// A decode step or verify pass in miniature: k activation rows through a chain of distinct
// matrices of one shape, about 300 MB in all, so every call streams its weights from memory
// as a real step does (the single-matrix benchmark above partly runs from the last-level
// cache). Small shapes show what each call's ramp-up costs (prefetchers that restart at every
// matrix, the hand-off to the pool); k > 1 shows how well the kernels' integer work overlaps
// the stream. args: shape index, k, threads.
void BM_MatmulChain(benchmark::State& state, GgmlType type) {
  const Shape s = kShapes[state.range(0)];
  if (!shape_fits(state, type, s)) return;
  const int64_t k = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  RandomWeights rw(type, s);
  WeightMatrix& w = rw.w;
  const size_t one = packed_bytes(w);
  const size_t n_mats = std::max<size_t>(2, (300u << 20) / one);
  std::vector<uint8_t> packed(one * n_mats);
  for (size_t m = 0; m < n_mats; ++m) pack_weights(w, packed.data() + m * one);
  const std::vector<float> x = random_floats(static_cast<size_t>(k * s.cols), 2);
  std::vector<float> out(static_cast<size_t>(k * s.rows));
  for (auto _ : state) {
    for (size_t m = 0; m < n_mats; ++m) {
      w.packed = packed.data() + m * one;
      matmul(w, x.data(), k, out.data(), pool);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(rw.bytes.size() * n_mats));
  state.SetLabel(std::string(type_name(type)) + " x" + std::to_string(n_mats));
}

// Sums a large buffer (well past the last-level cache) with wide loads: an upper bound for
// what a memory-bound matvec can reach on one thread.
void BM_StreamRead(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) << 20;  // MiB
  std::vector<uint64_t> buf(n / sizeof(uint64_t), 1);
  for (auto _ : state) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= buf.size(); i += 4) {
      s0 += buf[i];
      s1 += buf[i + 1];
      s2 += buf[i + 2];
      s3 += buf[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_StreamRead)->Arg(256)->Unit(benchmark::kMillisecond);

const bool kRegistered = [] {
  for (GgmlType t : kTypes) {
    benchmark::RegisterBenchmark((std::string("Matmul/") + std::string(type_name(t))).c_str(),
                                 BM_Matmul, t)
        ->Apply([](benchmark::internal::Benchmark* b) { matmul_args(b, false); })
        ->Unit(benchmark::kMicrosecond);
    if (packable(t)) {
      benchmark::RegisterBenchmark(
          (std::string("MatmulPacked/") + std::string(type_name(t))).c_str(), BM_Matmul, t)
          ->Apply([](benchmark::internal::Benchmark* b) { matmul_args(b, true); })
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(
          (std::string("MatmulChain/") + std::string(type_name(t))).c_str(), BM_MatmulChain, t)
          ->ArgsProduct({{4, 5, 6, 8, 9, 10}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 36, 64, 256}, {1, 2}})
          ->ArgNames({"shape", "k", "threads"})
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace specdec
