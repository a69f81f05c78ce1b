// Ctrl-C during a long command must not orphan a half-booted VM (QEMU and
// virtiofsd are daemons that outlive us). InterruptGuard blocks SIGINT,
// SIGTERM and SIGHUP for the process (BlockedSignals); the command checks
// Interrupted() between steps and cleans up before exiting.
#pragma once

#include "runtime/host/blocked_signals.h"

namespace capsule::cli {

class InterruptGuard {
 public:
  InterruptGuard() : signals_({SIGINT, SIGTERM, SIGHUP}) {}

  // True once one of the signals arrived (it is consumed here).
  bool Interrupted() {
    while (signals_.Next() != 0) interrupted_ = true;
    return interrupted_;
  }

 private:
  BlockedSignals signals_;
  bool interrupted_ = false;
};

}  // namespace capsule::cli
