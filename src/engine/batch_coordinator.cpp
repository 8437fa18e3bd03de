#include "engine/batch_coordinator.h"

#include <algorithm>

#include "common/error.h"

namespace specdec {

void BatchCoordinator::join() {
  std::lock_guard lock(mu_);
  ++active_;
}

void BatchCoordinator::leave() {
  std::unique_lock lock(mu_);
  if (active_ == 0) fail("BatchCoordinator::leave without join");
  --active_;
  maybe_fire(lock);
}

int BatchCoordinator::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

void BatchCoordinator::set_primary(const Model* model) {
  std::lock_guard lock(mu_);
  primary_ = model;
}

void BatchCoordinator::set_pass_observer(PassObserver observer) {
  std::lock_guard lock(mu_);
  observer_ = std::move(observer);
}

void BatchCoordinator::forward(Model& model, const Model::SequenceRows& rows) {
  // The cheap checks forward_batch would make, here, so that one slot's bad call (a full
  // context) throws on its own thread instead of failing everyone's pass.
  if (rows.cache == nullptr) fail("BatchCoordinator::forward: no KV cache");
  const KvCache& cache = *rows.cache;
  if (static_cast<int64_t>(rows.tokens.size()) > cache.capacity() - cache.length()) {
    fail("KV cache overflow: ", cache.length(), " + ", rows.tokens.size(),
         " tokens exceed capacity ", cache.capacity());
  }
  Call c{&model, rows, false, nullptr};
  std::unique_lock lock(mu_);
  if (active_ == 0) fail("BatchCoordinator::forward from a slot that has not joined");
  pending_.push_back(&c);
  ++waiting_;
  maybe_fire(lock);
  cv_.wait(lock, [&c] { return c.done; });
  if (c.error) std::rethrow_exception(c.error);
}

void BatchCoordinator::maybe_fire(std::unique_lock<std::mutex>& lock) {
  // Fire when every active slot waits here; whoever makes that true runs the pass.
  while (!firing_ && waiting_ > 0 && waiting_ >= active_) {
    firing_ = true;
    std::vector<Call*> batch;
    const bool others_pending = std::any_of(pending_.begin(), pending_.end(),
                                            [this](const Call* c) { return c->model != primary_; });
    if (others_pending) {
      // Only the other models' calls: the primary's keep waiting for the slots now drafting.
      auto primary = std::stable_partition(pending_.begin(), pending_.end(),
                                           [this](const Call* c) { return c->model != primary_; });
      batch.assign(pending_.begin(), primary);
      pending_.erase(pending_.begin(), primary);
    } else {
      batch.swap(pending_);
    }
    lock.unlock();
    run(batch);
    lock.lock();
    for (Call* c : batch) c->done = true;
    waiting_ -= static_cast<int>(batch.size());
    firing_ = false;
    cv_.notify_all();
  }
}

void BatchCoordinator::run(std::vector<Call*>& batch) {
  // One pass per model: the target's and the draft's calls of an iteration go in two passes
  // (the slots' drafts may each score their own vocabulary subset: forward_batch runs the
  // head once per subset and the rest of the model once).
  std::vector<bool> taken(batch.size(), false);
  std::vector<Model::SequenceRows> rows;
  std::vector<Call*> group;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (taken[i]) continue;
    rows.clear();
    group.clear();
    int64_t n_rows = 0;
    for (size_t j = i; j < batch.size(); ++j) {
      if (taken[j] || batch[j]->model != batch[i]->model) continue;
      taken[j] = true;
      rows.push_back(batch[j]->rows);
      group.push_back(batch[j]);
      n_rows += static_cast<int64_t>(batch[j]->rows.tokens.size());
    }
    try {
      batch[i]->model->forward_batch(rows, pool_);
    } catch (...) {
      // Arguments were checked per call; what is left (e.g. bad token ids) fails the group.
      for (Call* c : group) c->error = std::current_exception();
    }
    if (observer_) observer_(*batch[i]->model, n_rows, static_cast<int64_t>(group.size()));
  }
}

}  // namespace specdec
