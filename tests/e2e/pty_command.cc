// See pty_command.h. The child is `setsid -c <argv>`: a new session whose
// controlling terminal is its stdin, the slave (util-linux setsid does the
// TIOCSCTTY), so the kernel delivers SIGWINCH on a resize as a terminal
// emulator's would.
#include "tests/e2e/pty_command.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

}  // namespace

Result<PtyCommand> PtyCommand::Start(const std::vector<std::string>& argv, unsigned short rows, unsigned short cols) {
  int master = -1;
  int slave = -1;
  winsize ws{};
  ws.ws_row = rows;
  ws.ws_col = cols;
  if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0) return ErrnoStatus("openpty");
  UniqueFd m(master);
  UniqueFd s(slave);
  if (::fcntl(m.get(), F_SETFD, FD_CLOEXEC) != 0 || ::fcntl(s.get(), F_SETFD, FD_CLOEXEC) != 0)
    return ErrnoStatus("set FD_CLOEXEC on the pty");
  if (::fcntl(m.get(), F_SETFL, O_NONBLOCK) != 0) return ErrnoStatus("set O_NONBLOCK on the pty master");
  SpawnOptions o;
  o.argv = {"/usr/bin/setsid", "-c"};
  o.argv.insert(o.argv.end(), argv.begin(), argv.end());
  o.stdin_fd = o.stdout_fd = o.stderr_fd = s.get();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  s.reset();  // only the child holds the slave: its exit hangs the master up
  return PtyCommand(std::move(child), std::move(m));
}

Status PtyCommand::Write(const std::string& text) {
  std::string_view rest = text;
  while (!rest.empty()) {
    ssize_t n = ::write(master_.get(), rest.data(), rest.size());
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return ErrnoStatus("write to the pty master");
    pollfd p{master_.get(), POLLOUT, 0};
    (void)::poll(&p, 1, 1000);
  }
  return Status::Ok();
}

bool PtyCommand::Drain() {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master_.get(), buf, sizeof buf);
    if (n > 0) {
      output_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;  // EIO: every slave closed
  }
}

Status PtyCommand::WaitForOutput(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const bool open = Drain();
    if (output_.find(needle) != std::string::npos) return Status::Ok();
    if (!open) return Unavailable("the terminal hung up before \"" + needle + "\"; output: " + output_);
    pollfd p{master_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n < 0 && errno != EINTR) return ErrnoStatus("poll the pty master");
    if (n == 0)
      return DeadlineExceeded("no \"" + needle + "\" on the terminal after " + std::to_string(timeout.count()) +
                              " ms; output: " + output_);
  }
}

Status PtyCommand::Resize(unsigned short rows, unsigned short cols) {
  winsize ws{};
  ws.ws_row = rows;
  ws.ws_col = cols;
  if (::ioctl(master_.get(), TIOCSWINSZ, &ws) != 0) return ErrnoStatus("ioctl(TIOCSWINSZ) on the pty master");
  return Status::Ok();
}

Result<int> PtyCommand::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Drain()) {  // until the hang-up, so the output is complete
    pollfd p{master_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n == 0) return DeadlineExceeded("the command still runs after " + std::to_string(timeout.count()) + " ms");
  }
  ASSIGN_OR_RETURN(int status, child_.Wait(std::chrono::milliseconds(MillisLeft(deadline))));
  return ExitCode(status);
}

}  // namespace capsule::testing
