// Reaper: the one place that reaps children in a process that must collect
// every exit, including orphans reparented to it (the guest agent as PID 1,
// the shim as a child subreaper). Once started it waits for all children;
// ChildProcess then takes exit statuses from it instead of calling waitpid,
// and subscribers (e.g. the container engine) see every (pid, status).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/common/no_destructor.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule {

class Reaper {
 public:
  using Callback = std::function<void(pid_t pid, int wait_status)>;

  static Reaper& Instance();

  // Installs the SIGCHLD handler and starts the reaping thread. Idempotent.
  Status Start();
  bool active() const;

  // Callbacks run on the reaper thread for every reaped child, before its
  // status becomes visible to TakeStatus/WaitStatus; keep them short.
  int Subscribe(Callback cb);
  // Once this returns the callback is not running and will not run again,
  // so it may capture objects that die right after (also callable from
  // inside a callback).
  void Unsubscribe(int token);

  // Takes (once) the wait status of `pid` if it has been reaped.
  std::optional<int> TakeStatus(pid_t pid);
  // Like TakeStatus, waiting up to `deadline` for the reaper to get to it.
  std::optional<int> WaitStatus(pid_t pid, std::chrono::steady_clock::time_point deadline);

 private:
  Reaper() = default;
  friend class NoDestructor<Reaper>;
  void Loop();
  void ReapAll();

  // Statuses nobody has taken yet, oldest first, bounded by kMaxUnclaimed.
  static constexpr size_t kMaxUnclaimed = 4096;

  // Held while subscribers run (taken before mu_), so Unsubscribe can wait
  // for a callback in flight.
  std::mutex callbacks_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread::id thread_id_;            // guarded by mu_
  bool started_ = false;                 // guarded by mu_
  std::map<pid_t, int> statuses_;        // guarded by mu_
  std::deque<pid_t> order_;              // guarded by mu_
  std::map<int, Callback> subscribers_;  // guarded by mu_
  int next_token_ = 1;                   // guarded by mu_
  UniqueFd wake_read_;
  std::thread thread_;
};

}  // namespace capsule
