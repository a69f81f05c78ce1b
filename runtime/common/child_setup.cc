// The forked child's set-up before exec (child_setup.h).
#include "runtime/common/child_setup.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace capsule {
namespace {

// Places extra_fds at their child numbers. Sources first move above every
// target so no dup2 clobbers a source still needed.
bool PlaceExtraFds(const ChildSetup& s) {
  const int floor = ChildFdFloor(s);
  for (size_t i = 0; i < s.extra_count; ++i) {
    s.scratch[i] = ::fcntl(s.extra_fds[i].second, F_DUPFD_CLOEXEC, floor);
    if (s.scratch[i] < 0) return false;
  }
  for (size_t i = 0; i < s.extra_count; ++i) {
    // dup2 onto a different number clears CLOEXEC on the new descriptor.
    if (::dup2(s.scratch[i], s.extra_fds[i].first) < 0) return false;
  }
  return true;
}

}  // namespace

int ChildFdFloor(const ChildSetup& s) {
  int floor = 3;
  for (size_t i = 0; i < s.extra_count; ++i) floor = std::max(floor, s.extra_fds[i].first + 1);
  return floor;
}

std::optional<ChildStep> SetUpChild(const ChildSetup& s) {
  // The requested stdio move out of 0..2 first, so that no dup2 clobbers
  // one of them with another.
  int src[3];
  for (int i = 0; i < 3; ++i) {
    src[i] = s.stdio[i] < 0 ? s.dev_null : s.stdio[i];
    if (src[i] <= 2) {
      src[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 3);
      if (src[i] < 0) return ChildStep::kStdio;
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(src[i], i) < 0) return ChildStep::kStdio;
  }
  // ENOSYS (kernel < 5.11) leaves the fds' own flags as they are.
  if (s.close_other_fds) (void)::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  for (size_t i = 0; i < s.keep_count; ++i) {
    const int flags = ::fcntl(s.keep_fds[i], F_GETFD);
    if (flags < 0 || ::fcntl(s.keep_fds[i], F_SETFD, flags & ~FD_CLOEXEC) < 0) return ChildStep::kPassFds;
  }
  if (!PlaceExtraFds(s)) return ChildStep::kPassFds;
  if (s.default_signal_handlers) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (s.cwd != nullptr && s.cwd[0] != '\0' && ::chdir(s.cwd) != 0) return ChildStep::kChdir;
  return std::nullopt;
}

const char* ChildStepName(ChildStep step) {
  switch (step) {
    case ChildStep::kStdio: return "set up stdio";
    case ChildStep::kPassFds: return "pass fds";
    case ChildStep::kChdir: return "chdir";
  }
  return "set up";
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace capsule
