// Hand-off protocol: the caller publishes the job (fn, n), then bumps `generation_`. Workers
// spin on `generation_` for a short while (a decode step issues matmuls back to back, so the
// next job usually arrives within microseconds), then sleep with std::atomic::wait (a futex on
// Linux). Each worker runs its static chunk and decrements `pending_`; the caller runs chunk 0
// and then waits for `pending_` to reach zero. The release/acquire pairs on generation_ and
// pending_ order the job fields and the results between threads.
#include "tensor/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "common/error.h"

namespace specdec {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

constexpr int kSpinIterations = 1 << 14;  // roughly tens of microseconds of pause loops

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  std::mutex call_mutex;  // one parallel_for at a time per pool

  // Job description, written by the caller before generation_ is bumped.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  bool stop = false;

  std::atomic<uint32_t> generation{0};
  std::atomic<int> pending{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  void run_chunk(int index) {
    const int64_t begin = n * index / n_threads;
    const int64_t end = n * (index + 1) / n_threads;
    if (begin >= end) return;
    try {
      (*fn)(begin, end);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }

  void worker_loop(int index) {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = generation.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
        cpu_relax();
        g = generation.load(std::memory_order_acquire);
      }
      while (g == seen) {
        generation.wait(seen, std::memory_order_acquire);
        g = generation.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop) return;
      run_chunk(index);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  impl_->n_threads = std::max(1, n_threads);
  impl_->workers.reserve(static_cast<size_t>(impl_->n_threads - 1));
  for (int i = 1; i < impl_->n_threads; ++i) {
    impl_->workers.emplace_back([this, i] { impl_->worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  if (!impl_->workers.empty()) {
    impl_->stop = true;
    impl_->generation.fetch_add(1, std::memory_order_release);
    impl_->generation.notify_all();
    for (auto& t : impl_->workers) t.join();
  }
  delete impl_;
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (impl_->n_threads == 1 || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard call_lock(impl_->call_mutex);
  Impl& p = *impl_;
  p.fn = &fn;
  p.n = n;
  p.error = nullptr;
  p.pending.store(p.n_threads - 1, std::memory_order_relaxed);
  p.generation.fetch_add(1, std::memory_order_release);
  p.generation.notify_all();
  p.run_chunk(0);
  for (int spin = 0; p.pending.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (p.error) {
    std::exception_ptr e = p.error;
    p.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace specdec
