// EventLoop: one thread's epoll set with per-fd callbacks and one-shot timers.
// The vhost-user vsock back end runs everything (QEMU's socket, kick
// eventfds, every unix stream) on one loop, so no handler may block.
// Handlers may add or remove any fd, including their own, while dispatching.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vsock {

class EventLoop;
using EventLoopPtr = std::unique_ptr<EventLoop>;

class EventLoop {
 public:
  using Handler = std::function<void(uint32_t events)>;
  using Clock = std::chrono::steady_clock;
  using TimerId = uint64_t;

  static Result<EventLoopPtr> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` (not owned) for `events` (EPOLLIN, EPOLLOUT, EPOLLET ...).
  Status Add(int fd, uint32_t events, Handler handler);
  Status Modify(int fd, uint32_t events);
  // Stops watching `fd`; pending events for it in this round are dropped.
  void Remove(int fd);
  bool Watching(int fd) const { return by_fd_.count(fd) != 0; }

  // Runs `fn` once on the loop thread at or after `when`.
  TimerId AddTimer(Clock::time_point when, std::function<void()> fn);
  void CancelTimer(TimerId id);

  // Dispatches events until Stop() is called.
  Status Run();
  // Waits at most `timeout` (or until the next timer) and dispatches once.
  Status RunOnce(std::chrono::milliseconds timeout);
  // Thread-safe; makes Run() return after the current round.
  void Stop();
  // Thread-safe; runs `fn` on the loop thread during the next round.
  void Post(std::function<void()> fn);
  bool stopped() const { return stop_.load(); }

 private:
  struct Entry {
    int fd;
    std::shared_ptr<Handler> handler;
  };

  EventLoop(UniqueFd epoll, UniqueFd wake);
  int NextTimeoutMs(std::chrono::milliseconds cap) const;
  void FireTimers();
  void RunPosted();

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd written by Stop() and Post()
  std::atomic<bool> stop_{false};
  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;  // guarded by posted_mu_
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;  // token -> entry
  std::unordered_map<int, uint64_t> by_fd_;      // fd -> token
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, TimerId> timer_order_;
  std::unordered_map<TimerId, std::pair<Clock::time_point, std::function<void()>>> timers_;
};

}  // namespace capsule::vsock
