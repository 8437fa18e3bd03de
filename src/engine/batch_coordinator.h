// Lets the generations of several slots, each running on its own thread, share forward passes.
//
// A slot's model call (a decode step, a verify pass, a draft step, a prefill chunk) waits here
// until every active slot is waiting; then the last to arrive runs all the waiting calls, one
// Model::forward_batch per model, and wakes them. The weights are read once per pass for all
// slots, which is where batching pays on a CPU, and since forward_batch is bitwise what each
// sequence gets alone, a slot's output does not depend on who else is in the batch.
//
// Continuous batching falls out: a slot that starts generating joins (the next pass waits for
// it too), one that ends leaves (and fires the pass if everyone left is waiting).
//
// The primary model's calls (the target's: verify passes, prefill chunks, plain steps) wait
// while any other model's call (a draft step) is pending: drafts are cheap and run first, so
// that the slots' verify rows line up in one target pass instead of each slot whose drafting
// ended early getting a target pass of its own.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "model/model.h"

namespace specdec {

class ThreadPool;

class BatchCoordinator {
 public:
  explicit BatchCoordinator(ThreadPool& pool) : pool_(pool) {}

  void join();   // a slot starts generating: later passes wait for it
  void leave();  // it stopped (finished, cancelled or failed)
  int active() const;
  // The model whose calls wait for everyone else's (the target). Call before any slot runs.
  void set_primary(const Model* model);

  // Runs one sequence's rows (logits or hidden states; rows.cache set) as part of the next
  // batched pass; returns when it ran. Throws what Model::forward_batch would throw for them
  // (checked on the caller's thread first, so a bad call fails alone and never its batch).
  void forward(Model& model, const Model::SequenceRows& rows);

  // Called after every batched pass with the model and the rows it ran (for metrics).
  using PassObserver = std::function<void(const Model& model, int64_t rows, int64_t sequences)>;
  void set_pass_observer(PassObserver observer);

 private:
  struct Call {
    Model* model;
    Model::SequenceRows rows;
    bool done = false;
    std::exception_ptr error;
  };
  void maybe_fire(std::unique_lock<std::mutex>& lock);
  void run(std::vector<Call*>& batch);

  ThreadPool& pool_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0, waiting_ = 0;
  bool firing_ = false;
  std::vector<Call*> pending_;
  PassObserver observer_;
  const Model* primary_ = nullptr;
};

}  // namespace specdec
