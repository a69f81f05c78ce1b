// poll()-based blocking I/O with an eventfd for cancellation. A pty master
// reports EIO once the slave side is closed and drained: that is its eof.
#include "agent/engine/stdio.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "agent/engine/terminal.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {

// Upper bound for one read, whatever the caller asks (bytes).
constexpr size_t kMaxReadBytes = 1 << 20;

const log::Logger kStdioLog("engine.stdio");

Result<UniqueFd> MakeEventFd() {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoStatus("eventfd");
  return UniqueFd(fd);
}

// write(2) to a pipe whose reader is gone raises SIGPIPE at the calling
// thread; block it here and discard it, so the agent's disposition does not
// matter.
ssize_t WriteNoSigpipe(int fd, const void* buf, size_t len) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = ::write(fd, buf, len);
  int err = errno;
  if (n < 0 && err == EPIPE) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

}  // namespace

Result<std::shared_ptr<ProcessIo>> ProcessIo::CreatePipes(ChildStdio* child) {
  ASSIGN_OR_RETURN(UniqueFd cancel, MakeEventFd());
  std::shared_ptr<ProcessIo> io(new ProcessIo(false, std::move(cancel)));
  int p[3][2];
  for (auto& pp : p) {
    if (::pipe2(pp, O_CLOEXEC) != 0) return ErrnoStatus("pipe2 for stdio");
  }
  child->in.reset(p[0][0]);
  io->stdin_.fd.reset(p[0][1]);
  // Ours only (the child's end is its own file description): a write never
  // blocks past poll, so Shutdown and cancellation always reach it.
  RETURN_IF_ERROR_CTX(SetNonBlocking(io->stdin_.fd.get()), "stdin");
  io->stdout_.fd.reset(p[1][0]);
  child->out.reset(p[1][1]);
  io->stderr_.fd.reset(p[2][0]);
  child->err.reset(p[2][1]);
  return io;
}

Result<std::shared_ptr<ProcessIo>> ProcessIo::CreateTerminal() {
  ASSIGN_OR_RETURN(UniqueFd cancel, MakeEventFd());
  std::shared_ptr<ProcessIo> io(new ProcessIo(true, std::move(cancel)));
  io->stderr_.eof = true;
  return io;
}

ProcessIo::~ProcessIo() = default;

void ProcessIo::SetConsole(UniqueFd master) {
  std::scoped_lock lock(stdin_.mu, stdout_.mu, console_mu_);
  // Shared with stdin's dup: writes must not block past poll (see CreatePipes).
  if (Status st = SetNonBlocking(master.get()); !st.ok()) kStdioLog.Warn("{}", st.message());
  stdin_.fd.reset(::fcntl(master.get(), F_DUPFD_CLOEXEC, 3));
  console_.reset(::fcntl(master.get(), F_DUPFD_CLOEXEC, 3));
  stdout_.fd = std::move(master);
}

Result<ProcessIo::Readiness> ProcessIo::WaitReady(int fd, short events, const CancelCheck& cancel) {
  pollfd p[2] = {{fd, events, 0}, {cancel_.get(), POLLIN, 0}};
  const int timeout_ms = cancel.polls() ? static_cast<int>(kCancelPollInterval.count()) : -1;
  for (;;) {
    int r = ::poll(p, 2, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll stdio");
    if (p[1].revents) return Readiness::kShutdown;
    if (p[0].revents) return Readiness::kReady;
    if (cancel.cancelled()) return Readiness::kCancelled;
  }
}

Result<ReadResult> ProcessIo::ReadChannel(Channel& ch, size_t max, const CancelCheck& cancel) {
  std::lock_guard lock(ch.mu);
  ReadResult out;
  for (;;) {
    if (ch.eof || !ch.fd) {
      out.eof = true;
      return out;
    }
    ASSIGN_OR_RETURN(Readiness ready, WaitReady(ch.fd.get(), POLLIN, cancel));
    if (ready == Readiness::kCancelled) return Cancelled("read process output: the caller gave up");
    if (ready == Readiness::kShutdown) {
      out.eof = true;  // shut down: nothing more will be delivered
      return out;
    }
    out.data.resize(std::clamp<size_t>(max, 1, kMaxReadBytes));
    ssize_t n;
    do {
      n = ::read(ch.fd.get(), out.data.data(), out.data.size());
    } while (n < 0 && errno == EINTR);
    // A tty master shares its (non-blocking) file description with stdin.
    if (n < 0 && errno == EAGAIN) continue;
    if (n < 0 && errno != EIO) return ErrnoStatus("read process output");
    if (n <= 0) {
      ch.eof = true;
      ch.fd.reset();
      out.data.clear();
      out.eof = true;
      return out;
    }
    out.data.resize(static_cast<size_t>(n));
    return out;
  }
}

Result<ReadResult> ProcessIo::Read(Stream stream, size_t max, const CancelCheck& cancel) {
  return ReadChannel(stream == Stream::kStdout ? stdout_ : stderr_, max, cancel);
}

Result<size_t> ProcessIo::Write(std::string_view data, const CancelCheck& cancel) {
  std::lock_guard lock(stdin_.mu);
  if (!stdin_.fd || stdin_.eof) return FailedPrecondition("stdin is closed");
  size_t done = 0;
  while (done < data.size()) {
    ASSIGN_OR_RETURN(Readiness ready, WaitReady(stdin_.fd.get(), POLLOUT, cancel));
    if (ready == Readiness::kCancelled) return Cancelled("write stdin: the caller gave up");
    if (ready == Readiness::kShutdown) return Cancelled("stdin: process I/O shut down");
    ssize_t n = WriteNoSigpipe(stdin_.fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return ErrnoStatus("write stdin");
    done += static_cast<size_t>(n);
  }
  return done;
}

Status ProcessIo::CloseStdin() {
  std::lock_guard lock(stdin_.mu);
  if (stdin_.eof) return Status::Ok();
  stdin_.eof = true;
  if (!terminal_) {
    stdin_.fd.reset();
    return Status::Ok();
  }
  // A tty has no half-close: send the end-of-file character instead.
  termios t{};
  char veof = 4;  // ^D, the default VEOF
  if (stdin_.fd && ::tcgetattr(stdin_.fd.get(), &t) == 0) veof = static_cast<char>(t.c_cc[VEOF]);
  if (stdin_.fd && ::write(stdin_.fd.get(), &veof, 1) < 0 && errno != EIO) return ErrnoStatus("write VEOF to tty");
  return Status::Ok();
}

Status ProcessIo::Resize(uint32_t rows, uint32_t cols) {
  std::lock_guard lock(console_mu_);
  if (!terminal_) return FailedPrecondition("process has no terminal");
  if (!console_) return FailedPrecondition("terminal already closed");
  return ResizeTerminal(console_.get(), rows, cols);
}

void ProcessIo::Shutdown() {
  std::lock_guard lock(cancel_mu_);
  uint64_t one = 1;
  if (cancel_) (void)!::write(cancel_.get(), &one, sizeof one);
}

bool ProcessIo::drained() const { return stdout_.eof && stderr_.eof; }

void ProcessIo::Release() {
  Shutdown();
  std::scoped_lock lock(stdin_.mu, stdout_.mu, stderr_.mu, console_mu_);
  for (Channel* ch : {&stdin_, &stdout_, &stderr_}) {
    ch->fd.reset();
    ch->eof = true;
  }
  console_.reset();
  // Every channel is at eof, so no call polls the eventfd any more.
  std::lock_guard cancel_lock(cancel_mu_);
  cancel_.reset();
}

}  // namespace capsule::engine
