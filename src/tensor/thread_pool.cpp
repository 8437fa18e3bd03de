// Hand-off protocol.
//
// A job is [0, n) cut into n_chunks contiguous chunks. Chunks are claimed through one 64-bit
// atomic word, `claim_` = generation (32 bits) | n_chunks (16) | next unclaimed chunk (16),
// advanced by compare-exchange. Putting the generation in the same word is what makes late
// arrivals harmless: a worker that woke up for job g can only claim a chunk while the word
// still says g, and job g cannot end before every claimed chunk is finished, so the job
// fields it reads after a successful claim are still job g's.
//
// The caller publishes the job fields, then the claim word (release), then bumps `generation_`
// (the 32-bit futex word workers sleep on) and wakes sleepers only if there are any (a futex
// wake is a system call; most hand-offs find the workers spinning). Then it claims chunks
// itself like any worker. When no chunk is left it waits for `done_` to reach n_chunks, which
// only involves chunks that some running thread already started: a worker the OS has
// descheduled before claiming anything costs the caller nothing, its share is simply done by
// whoever runs.
//
// Waiting, for a new job (workers) or for the last chunks (caller), goes through three stages:
// a short _mm_pause spin (the next matmul of a decode step usually follows within a few
// microseconds), a few sched_yield()s (lets another runnable thread have the core when we are
// oversubscribed), then a futex wait through std::atomic::wait. Spinning is bounded in time,
// not iterations, because the cost of pause differs by an order of magnitude across CPUs.
#include "tensor/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace specdec {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Workers wait this long for the next job before yielding: long enough to bridge the gaps
// between the parallel sections of a decode step (norms, RoPE, short attention on the caller).
constexpr auto kWorkerSpin = std::chrono::microseconds(30);
// The caller's wait for chunks other threads are finishing: they started at about the same
// time and are about as long as the caller's own, so the wait is normally short.
constexpr auto kCallerSpin = std::chrono::microseconds(30);
constexpr int kYields = 4;
// More chunks than threads, so that dynamic claiming can rebalance when a thread is slow or
// descheduled; few enough that claiming (one contended compare-exchange) stays negligible.
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kMaxChunks = 0xffff;

constexpr uint64_t pack(uint32_t gen, uint64_t n_chunks, uint64_t next) {
  return (static_cast<uint64_t>(gen) << 32) | (n_chunks << 16) | next;
}
constexpr uint32_t gen_of(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
constexpr uint64_t chunks_of(uint64_t w) { return (w >> 16) & 0xffff; }
constexpr uint64_t next_of(uint64_t w) { return w & 0xffff; }

// Spins on pred() for up to `spin`, then yields a few times; returns whether pred() held.
template <typename Pred>
bool spin_then_yield(std::chrono::microseconds spin, const Pred& pred) {
  if (pred()) return true;
  const auto deadline = std::chrono::steady_clock::now() + spin;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      cpu_relax();
      if (pred()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  for (int i = 0; i < kYields; ++i) {
    std::this_thread::yield();
    if (pred()) return true;
  }
  return false;
}

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  std::mutex call_mutex;  // one parallel_for at a time per pool

  // Job description, written by the caller before the claim word is published; read by a
  // thread only after it claimed a chunk of the job (see the top of the file).
  void* ctx = nullptr;
  ChunkFn fn = nullptr;
  int64_t n = 0, chunk_len = 0;
  uint32_t n_chunks = 0;
  uint32_t last_gen = 0;  // caller-only

  std::atomic<uint64_t> claim{0};
  std::atomic<uint32_t> generation{0};
  std::atomic<int> sleepers{0};  // workers in (or about to enter) generation.wait
  std::atomic<uint32_t> done{0};
  std::atomic<bool> caller_waiting{false};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;

  // Claims and runs chunks of job `gen` until none is left (or the job is not current).
  void work(uint32_t gen) {
    uint64_t w = claim.load(std::memory_order_acquire);
    for (;;) {
      if (gen_of(w) != gen || next_of(w) >= chunks_of(w)) return;
      if (!claim.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        continue;  // w now holds the current word
      }
      const auto c = static_cast<int64_t>(next_of(w));
      const int64_t begin = c * chunk_len;
      const int64_t end = std::min(n, begin + chunk_len);
      const uint32_t total = n_chunks;  // read before `done` can let the job end
      try {
        fn(ctx, begin, end);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      // seq_cst pairs with the caller's store to caller_waiting (no lost wake-up).
      if (done.fetch_add(1) + 1 == total && caller_waiting.load()) done.notify_one();
      w = claim.load(std::memory_order_acquire);
    }
  }

  void worker_loop() {
    uint32_t seen = 0;
    for (;;) {
      auto fresh = [&] { return generation.load(std::memory_order_acquire) != seen; };
      if (!spin_then_yield(kWorkerSpin, fresh)) {
        // seq_cst pairs with the caller's generation store + sleepers load.
        sleepers.fetch_add(1);
        while (generation.load() == seen) generation.wait(seen);
        sleepers.fetch_sub(1);
      }
      seen = generation.load(std::memory_order_acquire);
      if (stop.load(std::memory_order_acquire)) return;
      work(seen);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  impl_->n_threads = std::max(1, n_threads);
  impl_->workers.reserve(static_cast<size_t>(impl_->n_threads - 1));
  for (int i = 1; i < impl_->n_threads; ++i) {
    impl_->workers.emplace_back([this] { impl_->worker_loop(); });
  }
}

ThreadPool::~ThreadPool() {
  if (!impl_->workers.empty()) {
    impl_->stop.store(true, std::memory_order_release);
    impl_->generation.fetch_add(1);
    impl_->generation.notify_all();
    for (auto& t : impl_->workers) t.join();
  }
  delete impl_;
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::run(int64_t n, int64_t min_chunk, void* ctx, ChunkFn fn) {
  if (n <= 0) return;
  Impl& p = *impl_;
  const int64_t max_chunks = std::min<int64_t>(kMaxChunks, p.n_threads * kChunksPerThread);
  int64_t len =
      std::max<int64_t>(std::max<int64_t>(min_chunk, 1), (n + max_chunks - 1) / max_chunks);
  const int64_t n_chunks = (n + len - 1) / len;
  if (p.n_threads == 1 || n_chunks == 1) {
    fn(ctx, 0, n);
    return;
  }
  std::lock_guard call_lock(p.call_mutex);
  p.ctx = ctx;
  p.fn = fn;
  p.n = n;
  p.chunk_len = len;
  p.n_chunks = static_cast<uint32_t>(n_chunks);
  p.error = nullptr;
  p.done.store(0, std::memory_order_relaxed);
  p.caller_waiting.store(false, std::memory_order_relaxed);
  const uint32_t gen = ++p.last_gen;
  p.claim.store(pack(gen, static_cast<uint64_t>(n_chunks), 0), std::memory_order_release);
  p.generation.store(gen);  // seq_cst: see worker_loop
  if (p.sleepers.load() > 0) p.generation.notify_all();

  p.work(gen);

  const auto total = static_cast<uint32_t>(n_chunks);
  auto finished = [&] { return p.done.load(std::memory_order_acquire) == total; };
  if (!spin_then_yield(kCallerSpin, finished)) {
    p.caller_waiting.store(true);  // seq_cst: see Impl::work
    for (uint32_t d = p.done.load(); d != total; d = p.done.load()) p.done.wait(d);
  }
  if (p.error) {
    std::exception_ptr e = p.error;
    p.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace specdec
