// See stop_signals.h.
#include "runtime/host/stop_signals.h"

#include <pthread.h>
#include <signal.h>

namespace capsule {
namespace {

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t set = StopSet();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal() {
  const sigset_t set = StopSet();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace capsule
