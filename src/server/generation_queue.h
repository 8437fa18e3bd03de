// Generation workers, one per engine slot, fed by a bounded FIFO queue.
//
// Each slot is a sequence with its own KV caches; its worker runs one job at a time, and the
// engine batches the forward passes of all slots that are generating (continuous batching,
// engine/batch_coordinator.h). HTTP threads submit a Job and wait on it (whole result or
// streamed text). A queued job goes to the free slot whose cached prompt shares the longest
// prefix with it (the follow-up turn of a chat, a shared system prompt); on a tie the least
// recently used one, so that a new conversation evicts the stalest cache.
//
// A job ends exactly once: finished, cancelled (Job::cancel, e.g. the client went away; the
// engine's text callback then returns false and the worker moves on) or failed (the engine
// threw). A job cancelled while still queued is skipped without running.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace specdec::server {

class Job {
 public:
  // The job's options get a counter of their own, which the engine counts the job's tokens into
  // (GET /slots' n_decoded).
  Job(std::vector<int32_t> prompt, GenerationOptions options)
      : prompt_(std::move(prompt)), options_(with_own_counter(std::move(options))) {}

  // The slot the job was handed to; -1 until then.
  int32_t slot() const { return slot_.load(std::memory_order_acquire); }

  // Asks the worker to stop this job (or skip it if it has not started). Idempotent.
  void cancel();
  bool cancelled() const;

  // Waits up to `timeout` until there is new text or the job has ended; moves the new text to
  // the end of `text` and, when `logprobs` is given, the logprobs of the tokens behind that text
  // to the end of `*logprobs`. Returns true when the job has ended and all of it was taken.
  bool wait(std::string& text, std::chrono::milliseconds timeout,
            std::vector<TokenLogprob>* logprobs = nullptr);

  // Valid once wait() returned true.
  const GenerationResult& result() const { return result_; }
  const std::string& error() const { return error_; }  // non-empty when the job failed
  bool failed() const { return !error_.empty(); }

 private:
  friend class GenerationQueue;
  bool push_text(std::string_view text);  // worker: false when cancelled
  // Worker: logprobs of tokens whose text comes with the next push_text (or at the end).
  void push_logprobs(std::span<const TokenLogprob> entries);
  void finish(GenerationResult result, std::string error);

  static GenerationOptions with_own_counter(GenerationOptions options) {
    options.decoded_counter = std::make_shared<std::atomic<int32_t>>(0);
    return options;
  }

  const std::vector<int32_t> prompt_;
  const GenerationOptions options_;
  int32_t pinned_slot_ = -1;  // submit()'s slot: the only one it may run on (-1: any)
  std::atomic<int32_t> slot_{-1};
  std::chrono::steady_clock::time_point admitted_at_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::vector<TokenLogprob> staged_logprobs_;   // pushed, their text not yet
  std::vector<TokenLogprob> pending_logprobs_;  // ready to be taken with pending_
  bool cancelled_ = false, done_ = false;
  GenerationResult result_;
  std::string error_;
};

class GenerationQueue {
 public:
  // What a worker runs for each job on its slot: Engine::generate in the server, a fake in tests.
  using Runner =
      std::function<GenerationResult(std::span<const int32_t>, const GenerationOptions&,
                                     const TextCallback&, const LogprobCallback&, int32_t slot)>;
  // How much of slot `slot`'s cache a job with this prompt and these options would reuse
  // (leading tokens; 0: none). A job goes to the free slot where this is largest.
  using PrefixLength = std::function<size_t(int32_t slot, std::span<const int32_t> prompt,
                                            const GenerationOptions& options)>;

  // capacity: how many jobs may wait (the running ones not included); n_slots workers.
  GenerationQueue(Runner runner, size_t capacity, Metrics& metrics, int32_t n_slots = 1,
                  PrefixLength prefix_length = {});
  ~GenerationQueue();  // shutdown()
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  // nullptr when the queue is full or shut down (the caller answers 503). Queued jobs that were
  // cancelled (their client left, or an n > 1 request that could not be queued whole) leave the
  // queue first, ended as cancelled, so that they hold no places. slot >= 0 (< n_slots): the
  // job runs on that slot only, after the jobs handed to it before; the jobs queued behind it
  // do not wait for it when another slot is free.
  std::shared_ptr<Job> submit(std::vector<int32_t> prompt, GenerationOptions options,
                              int32_t slot = -1);
  int32_t n_slots() const { return static_cast<int32_t>(assigned_.size()); }

  // Cancels the running jobs and every queued one, then joins the workers. Idempotent.
  void shutdown();

  size_t queued() const;

  // Runs fn on the calling thread while slot `slot` runs no job (llama-server's slot actions:
  // save, restore, erase): first waits for any other such action on the slot, then for its
  // running or assigned job to end, keeping queued jobs off the slot from then until fn
  // returns (they go to other slots or wait). False, fn not run, when the queue shuts down
  // first. fn's exceptions pass through.
  bool with_idle_slot(int32_t slot, const std::function<void()>& fn);

  // What each slot is doing, for llama-server's GET /slots: whether a job holds it, and that
  // job's task number (its place in dispatch order, as the slot's last job's when idle), prompt
  // length and options. Nothing of the prompt's text: other clients' requests stay theirs.
  struct SlotState {
    bool processing = false;
    uint64_t task = 0;  // 0: the slot has not run a job
    size_t prompt_tokens = 0;
    GenerationOptions options;  // the running job's
    int32_t decoded = 0;        // the tokens it has committed so far
  };
  std::vector<SlotState> slot_states() const;

 private:
  void work(int32_t slot);
  void dispatch();  // under mu_: hands queued jobs to free slots
  // Under mu_: the free slot `job` is best placed on (the longest cached prefix, then the least
  // recently used; its pinned slot only), or -1 when there is none.
  int32_t place(const Job& job) const;

  Runner runner_;
  PrefixLength prefix_length_;
  const size_t capacity_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> assigned_, running_;  // per slot
  std::vector<uint64_t> last_used_;                       // per slot: dispatch order, 0: never
  std::vector<char> reserved_;  // per slot: with_idle_slot holds it (no job is handed to it)
  uint64_t dispatched_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace specdec::server
