// See worker_pool.h. Invariant: every queued job has an idle thread reserved
// for it or a thread is spawned for it, so a job never waits behind a
// running one.
#include "runtime/ttrpc/worker_pool.h"

#include <system_error>

namespace capsule::ttrpc {

WorkerPool::WorkerPool(size_t max_jobs, std::chrono::milliseconds idle_timeout)
    : max_jobs_(max_jobs == 0 ? 1 : max_jobs), idle_timeout_(idle_timeout) {}

WorkerPool::~WorkerPool() { Close(); }

bool WorkerPool::TrySubmit(std::function<void()> job) {
  std::lock_guard lock(mu_);
  if (closing_ || draining_ || jobs_ >= max_jobs_) return false;
  ++jobs_;
  queue_.push_back(std::move(job));
  if (idle_ >= queue_.size()) {
    cv_.notify_one();
    return true;
  }
  try {
    SpawnLocked();
  } catch (const std::system_error&) {
    // Out of threads (RLIMIT_NPROC, memory): refuse like a full pool.
    queue_.pop_back();
    --jobs_;
    return false;
  }
  return true;
}

void WorkerPool::SpawnLocked() {
  JoinExitedLocked();
  const size_t key = next_key_++;
  threads_.emplace(key, std::thread([this, key] { WorkerLoop(key); }));
  ++idle_;  // after emplace: a failed thread start must not count
}

void WorkerPool::JoinExitedLocked() {
  // An exited worker has released mu_ for good and only unwinds, so joining
  // under the lock cannot deadlock.
  for (size_t key : exited_) {
    auto it = threads_.find(key);
    if (it == threads_.end()) continue;
    it->second.join();
    threads_.erase(it);
  }
  exited_.clear();
}

void WorkerPool::WorkerLoop(size_t key) {
  std::unique_lock lock(mu_);
  // SpawnLocked() already counted this thread as idle, so that a job
  // submitted while it starts up does not spawn yet another thread.
  while (true) {
    const bool woken =
        cv_.wait_for(lock, idle_timeout_, [this] { return closing_ || !queue_.empty(); });
    --idle_;
    if (closing_) return;  // Close() joins us
    if (!woken) {
      exited_.push_back(key);
      return;
    }
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // destroy captures before the slot is released
    lock.lock();
    if (--jobs_ == 0) drained_.notify_all();
    ++idle_;
  }
}

void WorkerPool::Drain() {
  {
    std::unique_lock lock(mu_);
    draining_ = true;
    drained_.wait(lock, [this] { return jobs_ == 0; });
  }
  Close();
}

void WorkerPool::Close() {
  std::map<size_t, std::thread> threads;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    jobs_ -= queue_.size();
    queue_.clear();
    threads.swap(threads_);
    exited_.clear();
  }
  cv_.notify_all();
  for (auto& [key, t] : threads) t.join();
}

size_t WorkerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size() - exited_.size();
}

size_t WorkerPool::idle_threads() const {
  std::lock_guard lock(mu_);
  return idle_;
}

}  // namespace capsule::ttrpc
