// Ctrl-C during a long command must not orphan a half-booted VM (QEMU and
// virtiofsd are daemons that outlive us). InterruptGuard blocks SIGINT,
// SIGTERM and SIGHUP for the process (threads started later inherit the
// mask) and collects them on a signalfd; the command checks Interrupted()
// between steps and cleans up before exiting.
#pragma once

#include <signal.h>

#include "runtime/common/unique_fd.h"

namespace capsule::cli {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();  // restores the old mask; pending signals stay pending
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // True once one of the signals arrived (it is consumed here).
  bool Interrupted();

 private:
  sigset_t old_{};
  UniqueFd fd_;
  bool interrupted_ = false;
};

}  // namespace capsule::cli
