// The copy threads and their shared state. Threads hold the state through a
// shared_ptr: one stuck in ProcessStdio::Read (a guest that never answers)
// cannot hang the destructor, which detaches it, and the state outlives it.
#include "shim/io/stdio_copier.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/common/backoff.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"
#include "shim/io/binary_logger.h"
#include "shim/io/host_io.h"

namespace capsule::shim::io {
namespace {

const log::Logger kStdioCopierLog("shim.io");

using SinkPtr = std::shared_ptr<UniqueFd>;

const char* StreamName(OutputStream s) { return s == OutputStream::kStdout ? "stdout" : "stderr"; }

Result<UniqueFd> MakeEventFd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) return ErrnoStatus("eventfd");
  return fd;
}

void Signal(int efd) {
  uint64_t one = 1;
  (void)!::write(efd, &one, sizeof one);
}

}  // namespace

struct StdioCopier::Shared {
  StdioTarget target;
  std::string name;  // "<ns>/<container id>" for logs
  bool terminal = false;  // one output stream: stdout
  std::unique_ptr<BinaryLogger> logger;
  SinkPtr stdout_sink;  // handed to the output threads at Start
  SinkPtr stderr_sink;
  UniqueFd stdin_fd;    // handed to the stdin thread at Start
  UniqueFd cancel_efd;  // readable once the copier is destroyed
  UniqueFd close_stdin_efd;  // readable once CloseStdin() was called
  std::atomic<bool> cancelled{false};
  std::atomic<bool> process_stdin_closed{false};

  std::mutex mu;
  std::condition_variable cv;
  ProcessStdioPtr process;      // guarded by mu; set once at Start
  bool started = false;         // guarded by mu
  bool has_stdin_thread = false;  // guarded by mu
  bool close_requested = false;   // guarded by mu
  int running = 0;              // guarded by mu: live copy threads
  int outputs_pending = 0;      // guarded by mu: output streams not finished

  void CloseProcessStdin() {
    if (process_stdin_closed.exchange(true)) return;
    if (Status st = process->CloseStdin(); !st.ok()) kStdioCopierLog.Debug("{} close stdin: {}", name, st.ToString());
  }

  void Finished(bool output) {
    {
      std::lock_guard lock(mu);
      --running;
      if (output) --outputs_pending;
    }
    cv.notify_all();
  }
};

namespace {

// A write to a pipe whose reader is gone (a logging binary that died) raises
// SIGPIPE in the writing thread; blocked here, the write fails with EPIPE
// instead, whatever the process's SIGPIPE disposition.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Drops a SIGPIPE left pending on this thread by a failed write.
void ClearPendingSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  timespec zero{};
  while (::sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

void OutputLoop(std::shared_ptr<StdioCopier::Shared> s, OutputStream stream, SinkPtr sink) {
  BlockSigpipe();
  bool writable = sink && sink->valid();
  Backoff backoff(kEmptyReadBackoff);
  for (;;) {
    auto chunk = s->process->Read(stream, kReadChunkBytes);
    if (!chunk.ok()) {
      kStdioCopierLog.Warn("{} {}: {}; treating it as the end of the stream", s->name, StreamName(stream),
                           chunk.status().ToString());
      break;
    }
    if (chunk->data.empty() && !chunk->eof && !s->cancelled.load()) {
      backoff.Wait();
      continue;
    }
    backoff.Reset();
    if (writable && !chunk->data.empty()) {
      Status st = WriteAllOrCancel(sink->get(), chunk->data, s->cancel_efd.get());
      if (st.code() == Code::kCancelled) break;
      if (!st.ok()) {
        ClearPendingSigpipe();
        // Keep draining so the process never blocks on a full pipe.
        kStdioCopierLog.Warn("{} {}: {}; discarding further output", s->name, StreamName(stream), st.ToString());
        writable = false;
      }
    }
    if (chunk->eof || s->cancelled.load()) break;
  }
  sink.reset();  // the last stream on a host end closes it: the reader's EOF
  s->Finished(/*output=*/true);
}

// Reads what `in` holds now; false once the FIFO reached EOF (no writer).
bool DrainStdin(StdioCopier::Shared& s, int in, bool* forward) {
  char buf[kReadChunkBytes];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
    if (!*forward) continue;
    if (Status st = s.process->Write(std::string_view(buf, static_cast<size_t>(n))); !st.ok()) {
      kStdioCopierLog.Warn("{} stdin: {}; discarding further input", s.name, st.ToString());
      *forward = false;
    }
  }
}

void StdinLoop(std::shared_ptr<StdioCopier::Shared> s, UniqueFd in) {
  bool forward = true;
  for (;;) {
    pollfd p[3] = {{in.get(), POLLIN, 0}, {s->cancel_efd.get(), POLLIN, 0},
                   {s->close_stdin_efd.get(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      kStdioCopierLog.Warn("{} stdin: {}", s->name, ErrnoStatus("poll").ToString());
      break;
    }
    if (p[1].revents != 0) {  // destroyed: drop the rest
      s->Finished(false);
      return;
    }
    const bool closing = p[2].revents != 0;
    // POLLIN: data; POLLHUP: every writer came and went. Before any writer
    // came, the FIFO reports nothing, so a read here never mistakes "no
    // writer yet" for EOF, except when closing, which ends stdin anyway.
    if (p[0].revents != 0 || closing) {
      if (!DrainStdin(*s, in.get(), &forward) || closing) break;
    }
  }
  in.reset();
  s->CloseProcessStdin();
  s->Finished(false);
}

// Opens the host ends for FIFO or file targets.
Status OpenSinks(StdioCopier::Shared& s) {
  const StdioTarget& t = s.target;
  if (t.kind == StdioKind::kFile) {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenOutputFile(t.stdout_path));
    s.stdout_sink = std::make_shared<UniqueFd>(std::move(fd));
    if (!t.stderr_path.empty()) s.stderr_sink = s.stdout_sink;  // one file, closed after both
    return Status::Ok();
  }
  if (!t.stdout_path.empty()) {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenOutputPath(t.stdout_path));
    s.stdout_sink = std::make_shared<UniqueFd>(std::move(fd));
  }
  if (!t.stderr_path.empty()) {
    if (t.stderr_path == t.stdout_path) {
      s.stderr_sink = s.stdout_sink;
    } else {
      ASSIGN_OR_RETURN(UniqueFd fd, OpenOutputPath(t.stderr_path));
      s.stderr_sink = std::make_shared<UniqueFd>(std::move(fd));
    }
  }
  return Status::Ok();
}

}  // namespace

StdioCopier::StdioCopier(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

Result<std::unique_ptr<StdioCopier>> StdioCopier::Open(const StdioSpec& spec) {
  auto s = std::make_shared<Shared>();
  ASSIGN_OR_RETURN(s->target, ResolveStdio(spec));
  s->name = spec.ns + "/" + spec.container_id;
  s->terminal = spec.terminal;
  ASSIGN_OR_RETURN(s->cancel_efd, MakeEventFd());
  ASSIGN_OR_RETURN(s->close_stdin_efd, MakeEventFd());
  if (s->target.kind == StdioKind::kBinary) {
    ASSIGN_OR_RETURN(s->logger, BinaryLogger::Start(s->target.binary, s->target.binary_args,
                                                    spec.container_id, spec.ns));
    s->stdout_sink = std::make_shared<UniqueFd>(s->logger->TakeStdout());
    UniqueFd err = s->logger->TakeStderr();  // a terminal has no stderr: EOF at once
    if (!spec.terminal) s->stderr_sink = std::make_shared<UniqueFd>(std::move(err));
  } else if (s->target.kind != StdioKind::kNull) {
    RETURN_IF_ERROR(OpenSinks(*s));
  }
  if (!s->target.stdin_fifo.empty()) {
    ASSIGN_OR_RETURN(s->stdin_fd, OpenStdinFifo(s->target.stdin_fifo));
  }
  return std::unique_ptr<StdioCopier>(new StdioCopier(std::move(s)));
}

Status StdioCopier::Start(ProcessStdioPtr process) {
  if (!process) return InvalidArgument("stdio copier: no process");
  Shared& s = *shared_;
  std::vector<std::pair<OutputStream, SinkPtr>> outputs;
  bool close_now = false;
  {
    std::lock_guard lock(s.mu);
    if (s.started) return FailedPrecondition("stdio copier for " + s.name + " already started");
    s.started = true;
    s.process = std::move(process);
    if (s.target.kind != StdioKind::kNull) {
      // Even a stream with no host end is drained, so the process never blocks.
      outputs.emplace_back(OutputStream::kStdout, std::move(s.stdout_sink));
      if (!s.terminal) outputs.emplace_back(OutputStream::kStderr, std::move(s.stderr_sink));
    }
    s.outputs_pending = static_cast<int>(outputs.size());
    s.running = s.outputs_pending + (s.stdin_fd ? 1 : 0);
    s.has_stdin_thread = s.stdin_fd.valid();
    close_now = !s.has_stdin_thread;
  }
  for (auto& [stream, sink] : outputs) threads_.emplace_back(OutputLoop, shared_, stream, std::move(sink));
  if (s.has_stdin_thread) threads_.emplace_back(StdinLoop, shared_, std::move(s.stdin_fd));
  if (close_now) s.CloseProcessStdin();  // no stdin: the process reads EOF
  return Status::Ok();
}

Status StdioCopier::WaitOutput(std::optional<std::chrono::milliseconds> timeout) {
  Shared& s = *shared_;
  std::unique_lock lock(s.mu);
  if (!s.started) return FailedPrecondition("stdio copier for " + s.name + " not started");
  auto done = [&] { return s.outputs_pending == 0; };
  if (!timeout) {
    s.cv.wait(lock, done);
    return Status::Ok();
  }
  if (!s.cv.wait_for(lock, *timeout, done))
    return DeadlineExceeded("output of " + s.name + " not drained after " +
                            std::to_string(timeout->count()) + " ms");
  return Status::Ok();
}

void StdioCopier::CloseStdin() {
  Shared& s = *shared_;
  bool close_process_stdin = false;
  {
    std::lock_guard lock(s.mu);
    if (s.close_requested) return;
    s.close_requested = true;
    close_process_stdin = s.started && !s.has_stdin_thread;
  }
  Signal(s.close_stdin_efd.get());  // the stdin thread forwards what is left, then closes
  if (close_process_stdin) s.CloseProcessStdin();
}

bool StdioCopier::ForwardsStdin() const { return !shared_->target.stdin_fifo.empty(); }

void StdioCopier::StdinClosedByAgent() { shared_->process_stdin_closed.store(true); }

const StdioTarget& StdioCopier::target() const { return shared_->target; }

StdioCopier::~StdioCopier() {
  Shared& s = *shared_;
  s.cancelled.store(true);
  Signal(s.cancel_efd.get());
  bool finished;
  {
    std::unique_lock lock(s.mu);
    finished = s.cv.wait_for(lock, kCopierStopTimeout, [&] { return s.running == 0; });
    if (!finished) {
      kStdioCopierLog.Warn(
          "{}: {} stdio copy thread(s) still blocked in the process's Read after {} ms; "
          "leaving them to finish on their own",
          s.name, s.running, kCopierStopTimeout.count());
    }
  }
  for (auto& t : threads_) {
    if (finished) {
      t.join();
    } else {
      t.detach();
    }
  }
  // The logging binary (if any) stops when the last owner of the shared
  // state lets go: here, or when a straggling thread finishes.
}

}  // namespace capsule::shim::io
