#include "runtime/host/blocked_signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

namespace capsule {

BlockedSignals::BlockedSignals(std::initializer_list<int> signals) {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : signals) sigaddset(&s, sig);
  ::pthread_sigmask(SIG_BLOCK, &s, &old_);
  fd_.reset(::signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK));
}

BlockedSignals::~BlockedSignals() {
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

int BlockedSignals::NextFrom(int fd) {
  signalfd_siginfo info{};
  if (fd < 0 || ::read(fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  return static_cast<int>(info.ssi_signo);
}

}  // namespace capsule
