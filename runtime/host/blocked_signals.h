// Signals a command handles itself instead of dying of them: blocked for
// the whole process (threads started later inherit the mask, so none lands
// on gRPC's or a helper's thread) and read from a signalfd, which a poll
// loop can wait on. Restores the old mask when it goes; signals that
// arrived meanwhile stay pending.
#pragma once

#include <signal.h>

#include <initializer_list>

#include "runtime/common/unique_fd.h"

namespace capsule {

class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals);
  ~BlockedSignals();
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // Readable while one of them is pending; -1 if the signalfd could not be made.
  int fd() const { return fd_.get(); }
  // The next pending one, 0 when none.
  int Next() const { return NextFrom(fd_.get()); }
  // The same on any non-blocking signalfd.
  static int NextFrom(int fd);

 private:
  sigset_t old_{};
  UniqueFd fd_;
};

}  // namespace capsule
