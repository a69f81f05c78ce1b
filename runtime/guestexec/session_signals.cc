#include "runtime/guestexec/session_signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

namespace capsule::guestexec {
namespace {

sigset_t HandledSignals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&s, sig);
  return s;
}

}  // namespace

SessionSignals::SessionSignals() {
  sigset_t s = HandledSignals();
  ::pthread_sigmask(SIG_BLOCK, &s, &old_);
  fd_.reset(::signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK));
}

SessionSignals::~SessionSignals() {
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

int SessionSignals::NextFrom(int fd) {
  signalfd_siginfo info{};
  if (fd < 0 || ::read(fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  return static_cast<int>(info.ssi_signo);
}

}  // namespace capsule::guestexec
