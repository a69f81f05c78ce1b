// CancelCheck: how a blocking engine call (Wait, Read, Write) learns that its
// caller gave up, e.g. the host cancelled the gRPC call or the agent is
// shutting down. The engine polls it every kCancelPollInterval while it
// blocks, so a call with a check returns CANCELLED within that interval.
#pragma once

#include <chrono>
#include <functional>

namespace capsule::engine {

// Polling bound: the sync gRPC API offers no cancellation callback, and a
// few hundred blocked calls waking twice a second cost nothing measurable.
inline constexpr std::chrono::milliseconds kCancelPollInterval{500};

class CancelCheck {
 public:
  CancelCheck() = default;  // never cancelled: the call blocks without polling
  explicit CancelCheck(std::function<bool()> fn) : fn_(std::move(fn)) {}

  // False for the default check: blocking calls then need no wake-ups.
  bool polls() const { return static_cast<bool>(fn_); }
  bool cancelled() const { return fn_ && fn_(); }

 private:
  std::function<bool()> fn_;
};

}  // namespace capsule::engine
