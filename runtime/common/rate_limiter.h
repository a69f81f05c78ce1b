// RateLimiter: at most `burst` events per `window` (a fixed window), for
// whatever an untrusted peer can make us do as often as it likes (publish
// an event, write a log line): the excess is counted, not acted on.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace capsule {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  RateLimiter(uint32_t burst, Clock::duration window) : burst_(burst), window_(window) {}

  // True when this event fits in the current window.
  bool Allow(Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mu_);
    if (now - window_start_ >= window_) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ < burst_) {
      ++used_;
      return true;
    }
    ++refused_;
    return false;
  }
  // Events refused so far.
  uint64_t refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }

 private:
  const uint32_t burst_;
  const Clock::duration window_;
  mutable std::mutex mu_;
  Clock::time_point window_start_{};
  uint32_t used_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace capsule
