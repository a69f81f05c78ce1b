// InterruptGuard over signalfd(2).
#include "runtime/cli/interrupt.h"

#include <sys/signalfd.h>
#include <unistd.h>

namespace capsule::cli {
namespace {

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGHUP);
  return s;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  sigset_t s = StopSignals();
  ::pthread_sigmask(SIG_BLOCK, &s, &old_);
  fd_.reset(::signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK));
}

InterruptGuard::~InterruptGuard() {
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

bool InterruptGuard::Interrupted() {
  signalfd_siginfo info{};
  while (fd_ && ::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) interrupted_ = true;
  return interrupted_;
}

}  // namespace capsule::cli
