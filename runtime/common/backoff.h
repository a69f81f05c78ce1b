// The one retry pacing: a pause that starts at `first` and doubles up to
// `max` (first == max: a fixed poll). Used where a retry must not spin: a
// dial waiting for its listener, a stream read that brings neither data
// nor its end (a broken or hostile peer: the guest's agent is untrusted),
// the pool's failed boots and template builds; and, through WaitUntil,
// every deadline poll: a VM's lock held by another process, QEMU's
// migration, a guest device's sysfs entry or node that is not there yet, a
// cgroup or mount still busy, and the tests' waits.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace capsule {

struct BackoffPolicy {
  std::chrono::milliseconds first;
  std::chrono::milliseconds max;
  // The pause after `previous` (0: none yet).
  std::chrono::milliseconds After(std::chrono::milliseconds previous) const {
    return previous.count() <= 0 ? first : std::min(max, previous * 2);
  }
};

// A stream read that brought neither data nor the stream's end is retried
// after 1 ms, doubling to 128 ms, until data comes (Reset).
inline constexpr BackoffPolicy kEmptyReadBackoff{std::chrono::milliseconds(1), std::chrono::milliseconds(128)};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy) : policy_(policy) {}
  // The next pause; each doubles the one after, up to the policy's max.
  std::chrono::milliseconds Next() { return current_ = policy_.After(current_); }
  // Sleeps the next pause, never past `deadline`.
  void Wait(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
    const auto pause = Next();
    const auto now = std::chrono::steady_clock::now();
    if (now < deadline) std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
  }
  // Progress: the next pause is `first` again.
  void Reset() { current_ = std::chrono::milliseconds(0); }
  std::chrono::milliseconds current() const { return current_; }

 private:
  BackoffPolicy policy_;
  std::chrono::milliseconds current_{0};
};

// Checks `done` until it holds (true) or `timeout` has passed (false),
// pausing between checks as `pacing` says: the poll over that pacing, for a
// condition that has no event to wait on.
template <typename Done>
bool WaitUntil(Done done, std::chrono::milliseconds timeout,
               BackoffPolicy pacing = {std::chrono::milliseconds(10), std::chrono::milliseconds(100)}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff pause(pacing);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pause.Wait(deadline);
  }
}

}  // namespace capsule
