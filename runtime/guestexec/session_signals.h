// The signals an exec session handles itself instead of dying of them:
// SIGINT, SIGTERM and SIGHUP (forwarded to the guest process) and SIGWINCH
// (the window size follows). Blocked for the whole process before any
// thread starts (gRPC's threads inherit the mask, so no signal lands on
// them), and read from a signalfd.
#pragma once

#include <signal.h>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::guestexec {

class SessionSignals {
 public:
  SessionSignals();
  ~SessionSignals();  // restores the old mask; pending signals stay pending
  SessionSignals(const SessionSignals&) = delete;
  SessionSignals& operator=(const SessionSignals&) = delete;

  // Readable while a signal is pending; -1 if the signalfd could not be made.
  int fd() const { return fd_.get(); }
  // The next pending signal, 0 when none.
  int Next() { return NextFrom(fd_.get()); }
  // The same on any such signalfd.
  static int NextFrom(int fd);

 private:
  sigset_t old_{};
  UniqueFd fd_;
};

}  // namespace capsule::guestexec
