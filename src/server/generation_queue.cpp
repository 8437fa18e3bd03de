#include "server/generation_queue.h"

#include <algorithm>
#include <exception>

namespace specdec::server {

void Job::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool Job::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool Job::wait(std::string& text, std::chrono::milliseconds timeout,
               std::vector<TokenLogprob>* logprobs) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return done_ || !pending_.empty(); });
  text += pending_;
  pending_.clear();
  if (logprobs != nullptr) {
    logprobs->insert(logprobs->end(), pending_logprobs_.begin(), pending_logprobs_.end());
  }
  pending_logprobs_.clear();
  return done_;
}

void Job::push_logprobs(std::span<const TokenLogprob> entries) {
  std::lock_guard lock(mu_);
  staged_logprobs_.insert(staged_logprobs_.end(), entries.begin(), entries.end());
}

bool Job::push_text(std::string_view text) {
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return false;
    pending_ += text;
    // The staged logprobs belong to this text: a reader takes both in one wait().
    pending_logprobs_.insert(pending_logprobs_.end(), staged_logprobs_.begin(),
                             staged_logprobs_.end());
    staged_logprobs_.clear();
  }
  cv_.notify_all();
  return true;
}

void Job::finish(GenerationResult result, std::string error) {
  {
    std::lock_guard lock(mu_);
    result_ = std::move(result);
    error_ = std::move(error);
    done_ = true;
    // Logprobs flushed after the last text (e.g. the end-of-generation token's).
    pending_logprobs_.insert(pending_logprobs_.end(), staged_logprobs_.begin(),
                             staged_logprobs_.end());
    staged_logprobs_.clear();
  }
  cv_.notify_all();
}

GenerationQueue::GenerationQueue(Runner runner, size_t capacity, Metrics& metrics, int32_t n_slots,
                                 PrefixLength prefix_length)
    : runner_(std::move(runner)),
      prefix_length_(std::move(prefix_length)),
      capacity_(capacity),
      metrics_(metrics),
      assigned_(static_cast<size_t>(std::max(1, n_slots))),
      running_(assigned_.size()),
      last_used_(assigned_.size(), 0),
      reserved_(assigned_.size(), 0) {
  for (size_t slot = 0; slot < assigned_.size(); ++slot) {
    workers_.emplace_back([this, slot] { work(static_cast<int32_t>(slot)); });
  }
}

GenerationQueue::~GenerationQueue() { shutdown(); }

std::shared_ptr<Job> GenerationQueue::submit(std::vector<int32_t> prompt, GenerationOptions options,
                                             int32_t slot) {
  auto job = std::make_shared<Job>(std::move(prompt), std::move(options));
  job->pinned_slot_ = slot;
  std::vector<std::shared_ptr<Job>> dropped;  // cancelled while queued
  bool admitted = false;
  {
    std::lock_guard lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->cancelled()) {
        dropped.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (!stopping_ && queue_.size() < capacity_) {
      queue_.push_back(job);
      metrics_.admitted();
      dispatch();
      admitted = true;
    }
    metrics_.set_queue_length(static_cast<int64_t>(queue_.size()));
  }
  // As a worker would have ended them, outside the queue's lock.
  for (const auto& d : dropped) {
    GenerationResult cancelled;
    cancelled.finish = FinishReason::Cancelled;
    metrics_.ended(Metrics::Outcome::Cancelled, cancelled.stats);
    d->finish(std::move(cancelled), "");
  }
  if (!admitted) return nullptr;
  cv_.notify_all();
  return job;
}

int32_t GenerationQueue::place(const Job& job) const {
  const auto free = [this](size_t slot) {
    return !assigned_[slot] && !running_[slot] && !reserved_[slot];
  };
  if (job.pinned_slot_ >= 0) {
    const auto slot = static_cast<size_t>(job.pinned_slot_);
    return slot < assigned_.size() && free(slot) ? job.pinned_slot_ : -1;
  }
  // The free slot whose cache holds the longest prefix of the job's prompt; on a tie the least
  // recently used.
  int32_t best = -1;
  size_t best_len = 0;
  for (size_t slot = 0; slot < assigned_.size(); ++slot) {
    if (!free(slot)) continue;
    const size_t len =
        prefix_length_ ? prefix_length_(static_cast<int32_t>(slot), job.prompt_, job.options_) : 0;
    if (best < 0 || len > best_len ||
        (len == best_len && last_used_[slot] < last_used_[static_cast<size_t>(best)])) {
      best = static_cast<int32_t>(slot);
      best_len = len;
    }
  }
  return best;
}

void GenerationQueue::dispatch() {
  // In arrival order; a job pinned to a busy slot keeps its place while the ones behind it go
  // to other free slots (a job that may run anywhere is placed whenever a slot is free, so those
  // keep their order among themselves).
  for (auto it = queue_.begin(); it != queue_.end();) {
    const int32_t slot = place(**it);
    if (slot < 0) {
      ++it;
      continue;
    }
    last_used_[static_cast<size_t>(slot)] = ++dispatched_;
    (*it)->slot_.store(slot, std::memory_order_release);
    assigned_[static_cast<size_t>(slot)] = std::move(*it);
    it = queue_.erase(it);
  }
}

bool GenerationQueue::with_idle_slot(int32_t slot, const std::function<void()>& fn) {
  const auto s = static_cast<size_t>(slot);
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this, s] { return stopping_ || !reserved_[s]; });
    if (stopping_) return false;
    reserved_[s] = 1;
    cv_.wait(lock, [this, s] { return stopping_ || (!assigned_[s] && !running_[s]); });
    if (stopping_) {
      reserved_[s] = 0;
      cv_.notify_all();
      return false;
    }
  }
  struct Release {
    GenerationQueue& q;
    size_t s;
    ~Release() {
      {
        std::lock_guard lock(q.mu_);
        q.reserved_[s] = 0;
        q.dispatch();  // jobs that waited for this slot
      }
      q.cv_.notify_all();
    }
  } release{*this, s};
  fn();
  return true;
}

size_t GenerationQueue::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void GenerationQueue::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    for (auto& job : queue_) job->cancel();
    for (auto& job : assigned_) {
      if (job) job->cancel();
    }
    for (auto& job : running_) {
      if (job) job->cancel();
    }
  }
  cv_.notify_all();
  for (std::thread& w : workers_) {
    if (w.joinable() && w.get_id() != std::this_thread::get_id()) w.join();
  }
  workers_.clear();
}

void GenerationQueue::work(int32_t slot) {
  const auto s = static_cast<size_t>(slot);
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock,
               [this, s] { return assigned_[s] != nullptr || (stopping_ && queue_.empty()); });
      if (!assigned_[s]) return;  // stopping, and every queued job has been handed out
      job = std::move(assigned_[s]);
      assigned_[s].reset();
      running_[s] = job;
      metrics_.set_queue_length(static_cast<int64_t>(queue_.size()));
    }
    GenerationResult result;
    std::string error;
    Metrics::Outcome outcome = Metrics::Outcome::Finished;
    if (job->cancelled()) {
      result.finish = FinishReason::Cancelled;
      outcome = Metrics::Outcome::Cancelled;
    } else {
      const auto since_admission = [&job] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - job->admitted_at_)
            .count();
      };
      metrics_.started(since_admission());
      bool first_text = true;
      try {
        result = runner_(
            job->prompt_, job->options_,
            [&](std::string_view text) {
              // (An embedding's read asks with empty text whether to go on: no token yet.)
              if (first_text && !text.empty()) {
                first_text = false;
                metrics_.first_token(since_admission());
              }
              return job->push_text(text);
            },
            [&job](std::span<const TokenLogprob> entries) { job->push_logprobs(entries); }, slot);
        if (result.finish == FinishReason::Cancelled) outcome = Metrics::Outcome::Cancelled;
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "generation failed";
        outcome = Metrics::Outcome::Failed;
      }
      metrics_.stopped_running();
    }
    metrics_.ended(outcome, result.stats);
    // The slot is free before the job's client hears that it ended, so that a request sent
    // right after (the next turn of a chat) can be placed on it.
    {
      std::lock_guard lock(mu_);
      running_[s].reset();
      dispatch();  // this slot is free: the next job may be best placed here
      metrics_.set_queue_length(static_cast<int64_t>(queue_.size()));
    }
    cv_.notify_all();
    job->finish(std::move(result), std::move(error));
  }
}

std::vector<GenerationQueue::SlotState> GenerationQueue::slot_states() const {
  std::lock_guard lock(mu_);
  std::vector<SlotState> out(assigned_.size());
  for (size_t slot = 0; slot < out.size(); ++slot) {
    out[slot].task = last_used_[slot];
    const std::shared_ptr<Job>& job = assigned_[slot] ? assigned_[slot] : running_[slot];
    if (!job) continue;
    out[slot].processing = true;
    out[slot].prompt_tokens = job->prompt_.size();
    out[slot].options = job->options_;
    out[slot].decoded = job->options_.decoded_counter->load(std::memory_order_relaxed);
  }
  return out;
}

}  // namespace specdec::server
