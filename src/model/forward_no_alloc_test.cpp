// The steady-state decode loop must not allocate: after the first pass of each width has sized
// the scratch buffers, decode steps (k = 1) and verify passes (k = 5, rolled back) allocate
// nothing, whatever the architecture, on 2 threads. Counted by replacing the global operator
// new of this test binary (every allocation in the process goes through it).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>
#include <vector>

#include "model/model.h"
#include "model/model_test_util.h"
#include "tensor/thread_pool.h"

namespace {
std::atomic<int64_t> g_allocations{0};

void* counted_alloc(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace specdec {
namespace {

TEST(ForwardAllocations, DecodeStepsAndVerifyPassesAllocateNothingOnceWarm) {
  for (const char* arch : {"llama", "qwen2", "gemma3", "qwen3"}) {
    testing::TinyModelSpec spec;
    spec.arch = arch;
    spec.n_embd = 256;
    spec.n_ff = 512;
    spec.n_layer = std::string(arch) == "gemma3" ? 6 : 2;
    spec.weight_type = GgmlType::Q4_1;  // packed matrices, plus a 300-row output with a tail
    testing::TinyModel m(spec);
    const int32_t n_vocab = m.model->config().n_vocab;
    KvCache cache(m.model->config(), 128);
    ThreadPool pool(2);

    std::vector<int32_t> tokens(8), positions(8), rows(8);
    std::iota(tokens.begin(), tokens.end(), 3);
    std::vector<float> logits(static_cast<size_t>(8 * n_vocab));
    auto pass = [&](int32_t k) {
      const int32_t start = cache.length();
      for (int32_t i = 0; i < k; ++i) {
        positions[static_cast<size_t>(i)] = start + i;
        rows[static_cast<size_t>(i)] = i;
      }
      m.model->forward(std::span<const int32_t>(tokens.data(), static_cast<size_t>(k)),
                       std::span<const int32_t>(positions.data(), static_cast<size_t>(k)), cache,
                       std::span<const int32_t>(rows.data(), static_cast<size_t>(k)), logits.data(),
                       pool);
    };
    pass(8);  // prefill
    pass(1);  // first decode step and first verify pass size everything
    pass(5);
    cache.truncate(cache.length() - 5);

    const int64_t before = g_allocations.load();
    for (int step = 0; step < 20; ++step) {
      pass(5);  // verify gamma = 4, then roll back all but one token
      cache.truncate(cache.length() - 4);
      pass(1);
    }
    EXPECT_EQ(g_allocations.load() - before, 0) << arch;
  }
}

}  // namespace
}  // namespace specdec
