// epoll dispatch keyed by per-registration tokens, so an fd that is removed
// (or closed and reused) while a round is being dispatched never receives a
// stale event meant for its previous owner.
#include "runtime/vsock/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

namespace capsule::vsock {
namespace {

// Events fetched per epoll_wait; more simply wait for the next round.
constexpr int kMaxEventsPerRound = 64;
// Token reserved for the Stop() eventfd.
constexpr uint64_t kWakeToken = 0;

}  // namespace

Result<EventLoopPtr> EventLoop::Create() {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) return ErrnoStatus("epoll_create1");
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoStatus("eventfd for event loop wake-up");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0)
    return ErrnoStatus("epoll_ctl add wake eventfd");
  return EventLoopPtr(new EventLoop(std::move(ep), std::move(wake)));
}

EventLoop::EventLoop(UniqueFd epoll, UniqueFd wake) : epoll_(std::move(epoll)), wake_(std::move(wake)) {}

EventLoop::~EventLoop() = default;

Status EventLoop::Add(int fd, uint32_t events, Handler handler) {
  if (by_fd_.count(fd) != 0) return AlreadyExists("event loop: fd " + std::to_string(fd) + " already watched");
  uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return ErrnoStatus("epoll_ctl add fd " + std::to_string(fd));
  entries_[token] = Entry{fd, std::make_shared<Handler>(std::move(handler))};
  by_fd_[fd] = token;
  return Status::Ok();
}

Status EventLoop::Modify(int fd, uint32_t events) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return NotFound("event loop: fd " + std::to_string(fd) + " not watched");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0)
    return ErrnoStatus("epoll_ctl mod fd " + std::to_string(fd));
  return Status::Ok();
}

void EventLoop::Remove(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  // The fd may already be closed by its owner; epoll dropped it then.
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  entries_.erase(it->second);
  by_fd_.erase(it);
}

EventLoop::TimerId EventLoop::AddTimer(Clock::time_point when, std::function<void()> fn) {
  TimerId id = next_timer_++;
  timer_order_.emplace(when, id);
  timers_[id] = {when, std::move(fn)};
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto range = timer_order_.equal_range(it->second.first);
  for (auto o = range.first; o != range.second; ++o) {
    if (o->second == id) {
      timer_order_.erase(o);
      break;
    }
  }
  timers_.erase(it);
}

int EventLoop::NextTimeoutMs(std::chrono::milliseconds cap) const {
  if (timer_order_.empty()) return static_cast<int>(cap.count());
  auto left = std::chrono::ceil<std::chrono::milliseconds>(timer_order_.begin()->first - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, cap.count()));
}

void EventLoop::FireTimers() {
  auto now = Clock::now();
  while (!timer_order_.empty() && timer_order_.begin()->first <= now) {
    TimerId id = timer_order_.begin()->second;
    timer_order_.erase(timer_order_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    auto fn = std::move(it->second.second);
    timers_.erase(it);
    fn();
  }
}

Status EventLoop::RunOnce(std::chrono::milliseconds timeout) {
  std::array<epoll_event, kMaxEventsPerRound> events{};
  int n = ::epoll_wait(epoll_.get(), events.data(), kMaxEventsPerRound, NextTimeoutMs(timeout));
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return ErrnoStatus("epoll_wait");
  }
  for (int i = 0; i < n && !stop_.load(); ++i) {
    uint64_t token = events[static_cast<size_t>(i)].data.u64;
    if (token == kWakeToken) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof v);
      RunPosted();
      continue;
    }
    auto it = entries_.find(token);
    if (it == entries_.end()) continue;  // removed earlier in this round
    std::shared_ptr<Handler> handler = it->second.handler;  // survives self-removal
    (*handler)(events[static_cast<size_t>(i)].events);
  }
  if (!stop_.load()) FireTimers();
  return Status::Ok();
}

Status EventLoop::Run() {
  // One hour caps a wait with no timers; any event ends it earlier.
  constexpr std::chrono::milliseconds kIdleWait{3600 * 1000};
  while (!stop_.load()) {
    RETURN_IF_ERROR(RunOnce(kIdleWait));
  }
  return Status::Ok();
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void EventLoop::RunPosted() {
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    fns.swap(posted_);
  }
  for (auto& fn : fns) fn();
}

void EventLoop::Stop() {
  stop_.store(true);
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

}  // namespace capsule::vsock
