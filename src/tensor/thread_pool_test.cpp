#include "tensor/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace specdec {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 13, 64, 1000, 4097}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        EXPECT_GE(b, 0);
        EXPECT_LE(e, n);
        calls.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n;
      EXPECT_LE(calls.load(), threads);
      if (n == 0) {
        EXPECT_EQ(calls.load(), 0);
      }
    }
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  ThreadPool pool(4);
  std::vector<int64_t> data(1000, 0);
  for (int iter = 0; iter < 300; ++iter) {
    pool.parallel_for(static_cast<int64_t>(data.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) data[static_cast<size_t>(i)] += i;
    });
  }
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], 300 * static_cast<int64_t>(i));
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(30,
                                 [](int64_t b, int64_t) {
                                   if (b > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(10, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 10);
}

TEST(ThreadPool, IdleWorkersWakeUp) {
  ThreadPool pool(3);
  pool.parallel_for(3, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers fall asleep
  std::atomic<int> calls{0};
  pool.parallel_for(3, [&](int64_t, int64_t) { calls++; });
  EXPECT_EQ(calls.load(), 3);
}

}  // namespace
}  // namespace specdec
