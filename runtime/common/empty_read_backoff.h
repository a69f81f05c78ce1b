// EmptyReadBackoff: a stream read that brings neither data nor the end of
// the stream (a broken or hostile peer: the guest's agent is untrusted) is
// retried after a pause that doubles from 1 ms to 128 ms, so such a peer
// cannot make its reader spin; data resets it.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace capsule {

class EmptyReadBackoff {
 public:
  void Reset() { empty_ = 0; }
  void Wait() {
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(empty_, kMaxShift)));
    ++empty_;
  }

 private:
  static constexpr int kMaxShift = 7;
  int empty_ = 0;
};

}  // namespace capsule
