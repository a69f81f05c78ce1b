// SIGCHLD -> self-pipe -> reaper thread -> waitpid(-1, WNOHANG) until empty.
// The handler only writes a byte, so it is async-signal-safe and works
// whatever signal masks other threads hold.
#include "runtime/common/reaper.h"

#include "runtime/common/no_destructor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace capsule {
namespace {

std::atomic<int> g_wake_write{-1};

void OnSigchld(int) {
  const int saved = errno;
  const int fd = g_wake_write.load();
  if (fd >= 0) {
    char b = 1;
    (void)!::write(fd, &b, 1);
  }
  errno = saved;
}

}  // namespace

Reaper& Reaper::Instance() {
  // Never destroyed: the reaping thread runs until the process ends.
  static NoDestructor<Reaper> reaper;
  return reaper.get();
}

Status Reaper::Start() {
  std::lock_guard lock(mu_);
  if (started_) return Status::Ok();
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("reaper: pipe2");
  wake_read_.reset(p[0]);
  g_wake_write.store(p[1]);
  struct sigaction sa{};
  sa.sa_handler = OnSigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGCHLD, &sa, nullptr) != 0) return ErrnoStatus("reaper: sigaction(SIGCHLD)");
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  thread_id_ = thread_.get_id();
  thread_.detach();  // lives as long as the process
  return Status::Ok();
}

bool Reaper::active() const {
  std::lock_guard lock(mu_);
  return started_;
}

int Reaper::Subscribe(Callback cb) {
  std::lock_guard lock(mu_);
  int token = next_token_++;
  subscribers_.emplace(token, std::move(cb));
  return token;
}

void Reaper::Unsubscribe(int token) {
  {
    std::lock_guard lock(mu_);
    if (std::this_thread::get_id() == thread_id_) {  // from a callback: callbacks_mu_ is ours already
      subscribers_.erase(token);
      return;
    }
  }
  std::lock_guard callbacks(callbacks_mu_);
  std::lock_guard lock(mu_);
  subscribers_.erase(token);
}

std::optional<int> Reaper::TakeStatus(pid_t pid) {
  std::lock_guard lock(mu_);
  auto it = statuses_.find(pid);
  if (it == statuses_.end()) return std::nullopt;
  int st = it->second;
  statuses_.erase(it);
  return st;
}

std::optional<int> Reaper::WaitStatus(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return statuses_.count(pid) != 0; });
  auto it = statuses_.find(pid);
  if (it == statuses_.end()) return std::nullopt;
  int st = it->second;
  statuses_.erase(it);
  return st;
}

void Reaper::Loop() {
  for (;;) {
    ReapAll();
    // The poll timeout covers a SIGCHLD that raced with the last waitpid.
    pollfd p{wake_read_.get(), POLLIN, 0};
    (void)::poll(&p, 1, 1000);
    char buf[64];
    while (::read(wake_read_.get(), buf, sizeof buf) > 0) {
    }
  }
}

void Reaper::ReapAll() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG | __WALL);
    if (pid <= 0) {
      if (pid < 0 && errno == EINTR) continue;
      return;
    }
    // Subscribers first, so whoever waits for this pid sees its exit only
    // after every subscriber has; a subscriber removed meanwhile is skipped.
    {
      std::lock_guard callbacks(callbacks_mu_);
      std::map<int, Callback> subs;
      {
        std::lock_guard lock(mu_);
        subs = subscribers_;
      }
      for (auto& [token, cb] : subs) {
        bool still_subscribed;
        {
          std::lock_guard lock(mu_);
          still_subscribed = subscribers_.count(token) != 0;
        }
        if (still_subscribed) cb(pid, status);
      }
    }
    {
      std::lock_guard lock(mu_);
      statuses_[pid] = status;
      order_.push_back(pid);
      while (order_.size() > kMaxUnclaimed) {
        statuses_.erase(order_.front());
        order_.pop_front();
      }
    }
    cv_.notify_all();
  }
}

}  // namespace capsule
