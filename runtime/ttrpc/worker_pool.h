// Per-connection handler threads: grows on demand up to a cap, reuses idle
// threads, and lets a thread go after it idled a while. A handler that
// blocks for minutes holds one thread and never delays the others; at the
// cap, TrySubmit refuses instead of queueing behind blocked handlers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace capsule::ttrpc {

class WorkerPool {
 public:
  WorkerPool(size_t max_jobs, std::chrono::milliseconds idle_timeout);
  ~WorkerPool();  // Close()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `job` on a pool thread. False when max_jobs are already queued or
  // running, or after Close().
  bool TrySubmit(std::function<void()> job);

  // Drops jobs not yet started, waits for running ones, joins every thread.
  void Close();
  // Refuses new jobs, lets queued and running ones finish, then Close().
  void Drain();

  size_t threads() const;
  // Threads waiting for work (including ones still starting up).
  size_t idle_threads() const;

 private:
  void WorkerLoop(size_t key);
  void SpawnLocked();
  void JoinExitedLocked();

  const size_t max_jobs_;
  const std::chrono::milliseconds idle_timeout_;

  mutable std::mutex mu_;
  std::condition_variable cv_;        // work queued, or closing_
  std::condition_variable drained_;  // jobs_ dropped to zero
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  size_t jobs_ = 0;                          // queued + running, guarded by mu_
  size_t idle_ = 0;                          // threads waiting for work, guarded by mu_
  bool closing_ = false;                     // guarded by mu_
  bool draining_ = false;                    // guarded by mu_
  size_t next_key_ = 0;                      // guarded by mu_
  std::map<size_t, std::thread> threads_;    // guarded by mu_
  std::vector<size_t> exited_;               // idle-exited, to join; guarded by mu_
};

}  // namespace capsule::ttrpc
