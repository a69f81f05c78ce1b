// The tests' one poll: checks `done` until it holds or `timeout` has
// passed, pausing between checks with the project's Backoff (10 ms,
// doubling to 100 ms), so a condition that holds soon is seen soon and a
// slow one costs few wake-ups.
#pragma once

#include <chrono>

#include "runtime/common/backoff.h"

namespace capsule::testing {

inline constexpr BackoffPolicy kTestPoll{std::chrono::milliseconds(10), std::chrono::milliseconds(100)};

template <typename Done>
bool WaitUntil(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff pause(kTestPoll);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pause.Wait(deadline);
  }
}

}  // namespace capsule::testing
