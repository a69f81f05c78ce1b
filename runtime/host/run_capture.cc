// RunAndCapture: ChildProcess with one pipe for stdout+stderr, drained with
// poll until EOF or the deadline; the child is always reaped.
#include "runtime/host/run_capture.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule {

Result<Captured> RunAndCapture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd out_r(p[0]), out_w(p[1]);
  SpawnOptions so;
  so.argv = argv;
  so.stdout_fd = so.stderr_fd = out_w.get();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
  out_w.reset();
  Captured c;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pf{out_r.get(), POLLIN, 0};
    int r = ::poll(&pf, 1, static_cast<int>(std::max<long>(left, 0)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      child.Terminate(std::chrono::milliseconds(0));
      return DeadlineExceeded(fmt::format("{} did not finish within {} ms", argv[0], timeout.count()));
    }
    char buf[8192];
    ssize_t n = ::read(out_r.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    c.output.append(buf, static_cast<size_t>(n));
  }
  ASSIGN_OR_RETURN(int status, child.Wait(timeout));
  c.exit_code = ExitCode(status);
  return c;
}

}  // namespace capsule
