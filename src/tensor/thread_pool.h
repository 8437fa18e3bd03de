// A persistent pool of worker threads for data-parallel kernels. A decode step of a small
// model is about a millisecond split over a hundred or more parallel_for calls, so hand-off
// must cost microseconds when cores are free, and must degrade gracefully when they are not
// (other processes, more threads than cores): work is split into more chunks than threads and
// claimed dynamically, so whoever is running does the work and nobody waits on a thread that
// the OS has descheduled before it claimed anything.
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

namespace specdec {

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  // Calls fn(begin, end) on disjoint contiguous chunks that together cover [0, n), each chunk
  // run by whichever thread claims it (the caller takes part), and returns when all are done.
  // Chunks are at least min_chunk long (except the last) and there are at most a few per
  // thread. Which thread runs a chunk, and how [0, n) is cut, must not change what fn computes
  // for any index; that is what keeps results independent of the thread count and scheduling.
  // fn is only borrowed for the duration of the call (no copy, no allocation).
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn, int64_t min_chunk = 1) {
    using F = std::remove_reference_t<Fn>;
    run(n, min_chunk, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* f, int64_t b, int64_t e) { (*static_cast<F*>(f))(b, e); });
  }

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
  void run(int64_t n, int64_t min_chunk, void* ctx, ChunkFn fn);

  struct Impl;
  Impl* impl_;
};

}  // namespace specdec
