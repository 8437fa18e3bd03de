// A persistent pool of worker threads for data-parallel kernels. A decode step of a small
// model is about a millisecond, so hand-off is a spin-then-wait on an atomic generation
// counter, not a mutex + condition variable per op, and threads are created once.
#pragma once

#include <cstdint>
#include <functional>

namespace specdec {

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  // Calls fn(begin, end) on disjoint contiguous chunks that together cover [0, n), spread over
  // the threads (the caller takes part), and returns when all are done. The chunking never
  // changes what is computed for any index, so results do not depend on the thread count.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace specdec
