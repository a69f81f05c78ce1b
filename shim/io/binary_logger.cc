// Starting, readiness handshake and stopping of a containerd logging binary.
#include "shim/io/binary_logger.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "shim/io/host_io.h"

namespace capsule::shim::io {
namespace {

const log::Logger kBinaryLoggerLog("shim.io");

// Fd numbers the logger finds its ends at (containerd's ExtraFiles order).
constexpr int kLoggerStdoutFd = 3;
constexpr int kLoggerStderrFd = 4;
constexpr int kLoggerReadyFd = 5;

struct Pipe {
  UniqueFd r, w;
};

Result<Pipe> MakePipe(const char* what) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus(std::string("pipe for logger ") + what);
  return Pipe{UniqueFd(p[0]), UniqueFd(p[1])};
}

// One byte or EOF on the ready pipe means ready; a timeout means not.
Status WaitReady(int ready_r, const std::string& binary) {
  pollfd p{ready_r, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(kLoggerReadyTimeout.count()));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoStatus("poll logger ready pipe");
  if (r == 0)
    return DeadlineExceeded("logging binary " + binary + " did not signal ready on fd 5 within " +
                            std::to_string(kLoggerReadyTimeout.count()) + " ms");
  char b;
  (void)!::read(ready_r, &b, 1);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<BinaryLogger>> BinaryLogger::Start(const std::string& binary,
                                                          const std::vector<std::string>& args,
                                                          const std::string& container_id,
                                                          const std::string& ns) {
  ASSIGN_OR_RETURN(Pipe out, MakePipe("stdout"));
  ASSIGN_OR_RETURN(Pipe err, MakePipe("stderr"));
  ASSIGN_OR_RETURN(Pipe ready, MakePipe("ready"));
  SpawnOptions o;
  o.argv = {binary};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = std::vector<std::string>{"CONTAINER_ID=" + container_id, "CONTAINER_NAMESPACE=" + ns};
  o.extra_fds = {{kLoggerStdoutFd, out.r.get()}, {kLoggerStderrFd, err.r.get()},
                 {kLoggerReadyFd, ready.w.get()}};
  auto child = ChildProcess::Spawn(o);
  if (!child.ok()) return std::move(child).status().WithContext("start logging binary");
  ready.w.reset();  // now only the logger holds it: its exit also means "ready"
  if (Status st = WaitReady(ready.r.get(), binary); !st.ok()) return st;  // child killed by ~ChildProcess
  RETURN_IF_ERROR(SetNonBlocking(out.w.get()));
  RETURN_IF_ERROR(SetNonBlocking(err.w.get()));
  kBinaryLoggerLog.Info("logging binary {} pid {} ready for {}/{}", binary, child->pid(), ns, container_id);
  return std::unique_ptr<BinaryLogger>(
      new BinaryLogger(std::move(*child), std::move(out.w), std::move(err.w)));
}

BinaryLogger::~BinaryLogger() { Stop(); }

void BinaryLogger::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stdout_w_.reset();
  stderr_w_.reset();
  if (child_.Wait(kLoggerEofGrace).ok()) return;
  kBinaryLoggerLog.Warn("logging binary pid {} still running {} ms after EOF; sending SIGTERM", child_.pid(),
                        kLoggerEofGrace.count());
  child_.Terminate(kLoggerTermGrace);
}

}  // namespace capsule::shim::io
