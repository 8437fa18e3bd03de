// Attention over the KV cache at a given depth, as a decode step or a verify pass runs it: the
// Qwen2.5-Coder-1.5B's shape (12 query heads of 128 sharing 2 KV heads), all 28 layers one after
// another so that the cache streams from memory as in a real step (28 x 2 x depth x 1 KiB).
//   bench_model --benchmark_filter=Attention
// Args: depth (cached slots), new tokens k, threads, kv (how K and V are stored: 0 f32, 1 f16,
// 2 q8_0, 3 q8_0 keys with f16 values).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

ModelConfig qwen_1_5b_attention() {
  ModelConfig c;
  c.arch = "qwen2";
  c.n_vocab = 16;
  c.n_embd = 1536;
  c.n_layer = 28;
  c.n_head = 12;
  c.n_head_kv = 2;
  c.head_dim = 128;
  c.rope_dim = 128;
  c.n_ff = 8960;
  return c;
}

void BM_Attention(benchmark::State& state) {
  const auto depth = static_cast<int32_t>(state.range(0));
  const auto k = static_cast<int32_t>(state.range(1));
  const ModelConfig c = qwen_1_5b_attention();
  constexpr KvTypes kTypes[] = {
      {}, {KvType::F16, KvType::F16}, {KvType::Q8_0, KvType::Q8_0}, {KvType::Q8_0, KvType::F16}};
  const KvTypes types = kTypes[state.range(3)];
  KvCache cache(c, depth + k, types);
  std::vector<float> kr(static_cast<size_t>(c.head_dim)), vr(kr.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (int32_t h = 0; h < c.n_head_kv; ++h) {
      for (int32_t s = 0; s < depth + k; ++s) {
        for (int32_t d = 0; d < c.head_dim; ++d) {
          kr[static_cast<size_t>(d)] = normal(rng);
          vr[static_cast<size_t>(d)] = normal(rng);
        }
        cache.store(l, h, s, kr.data(), vr.data());
      }
    }
  }
  std::vector<float> q(static_cast<size_t>(k) * c.q_dim());
  for (float& x : q) x = normal(rng);
  std::vector<float> out(q.size());
  Scratch scratch;
  ThreadPool pool(static_cast<int>(state.range(2)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  for (auto _ : state) {
    for (int32_t l = 0; l < c.n_layer; ++l) {
      causal_attention(c, cache, l, depth, q.data(), k, out.data(), scratch, pool, scale, 0);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["us_per_layer"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * c.n_layer,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_Attention)
    ->ArgNames({"depth", "k", "threads", "kv"})
    ->ArgsProduct({{128, 512, 1024, 2048}, {1, 5}, {1, 2}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace specdec
