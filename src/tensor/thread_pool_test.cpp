#include "tensor/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
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
      // A few chunks per thread at most (claimed dynamically, so not one per thread).
      EXPECT_LE(calls.load(), std::max<int64_t>(1, std::min<int64_t>(n, 4 * threads)));
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

TEST(ThreadPool, MinChunkIsHonoured) {
  ThreadPool pool(2);
  for (int64_t n : {1, 15, 16, 17, 100, 1000}) {
    std::atomic<int64_t> covered{0};
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          // Every chunk but the one ending at n is at least min_chunk long.
          if (e != n) {
            EXPECT_GE(e - b, 16);
          }
          covered += e - b;
        },
        16);
    EXPECT_EQ(covered.load(), n);
  }
}

// A chunk that stalls (standing in for a descheduled thread) must not hold up the others:
// the remaining chunks are claimed by whoever is running, each exactly once.
TEST(ThreadPool, StalledChunkDoesNotBlockOthers) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64);
  pool.parallel_for(64, [&](int64_t b, int64_t e) {
    if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

// More threads than cores: every job still completes and covers its range once, and the pool
// does not live-lock (the test would time out).
TEST(ThreadPool, OversubscribedStillCompletes) {
  const int threads = 3 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  std::vector<int64_t> data(257, 0);
  for (int iter = 0; iter < 2000; ++iter) {
    pool.parallel_for(static_cast<int64_t>(data.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) data[static_cast<size_t>(i)] += 1;
    });
  }
  for (int64_t v : data) ASSERT_EQ(v, 2000);
}

TEST(ThreadPool, AcceptsStdFunction) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  const std::function<void(int64_t, int64_t)> fn = [&](int64_t b, int64_t e) { sum += e - b; };
  pool.parallel_for(100, fn);
  EXPECT_EQ(sum.load(), 100);
}

}  // namespace
}  // namespace specdec
