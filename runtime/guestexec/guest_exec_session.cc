// Threads: one per output stream (blocking reads; the agent's pace is the
// back-pressure), one blocked in WaitProcess, and the caller's, which
// multiplexes stdin, signals and the exit with poll(2).
#include "runtime/guestexec/guest_exec_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/backoff.h"
#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/host/blocked_signals.h"

namespace capsule::guestexec {
namespace {

namespace v1 = agentclient::v1;
using std::chrono::milliseconds;

constexpr size_t kChunk = 32 * 1024;
// After the command exits: how long output still in flight (or held open by
// something it left running) is copied before the process is removed.
constexpr milliseconds kDrainGrace{2000};
// KillAndRemove's bound on the wait for a killed process.
constexpr milliseconds kRemoveWait{10000};

std::string NewExecId() {
  const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
  return fmt::format("capsule-exec-{}-{}", ::getpid(), ns % 1000000000);
}

// Counts the output threads still copying, so the caller can wait for them
// with a bound.
class Pending {
 public:
  explicit Pending(int n) : n_(n) {}
  void Done() {
    std::lock_guard lock(mu_);
    --n_;
    cv_.notify_all();
  }
  bool WaitFor(milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
};

// Copies one output stream to `fd` until its end. When `fd` stops taking
// data (a reader that went away, as `exec ... | head` leaves), the command
// gets SIGPIPE as it would writing to a closed pipe on the host, and the
// stream is drained so it never blocks on a full pipe in the guest.
void CopyOutput(agentclient::AgentClient& agent, const std::string& exec_id, bool stderr_stream, int fd) {
  v1::ReadStreamRequest req;
  req.set_exec_id(exec_id);
  req.set_len(kChunk);
  bool writable = true;
  Backoff backoff(kEmptyReadBackoff);
  for (;;) {
    auto r = stderr_stream ? agent.ReadStderr(req) : agent.ReadStdout(req);
    if (!r.ok() || r->eof()) return;
    if (r->data().size() > kChunk) return;  // more than asked: a lying guest ends its stream
    if (r->data().empty()) {
      backoff.Wait();
      continue;
    }
    backoff.Reset();
    if (writable && !WriteAll(fd, r->data(), "").ok()) {
      writable = false;
      v1::SignalProcessRequest pipe;
      pipe.set_exec_id(exec_id);
      pipe.set_signal(SIGPIPE);
      pipe.set_all(true);
      (void)agent.SignalProcess(pipe);
    }
  }
}

// Kills everything the command started, waits (bounded) for it, removes it.
Status KillAndRemove(agentclient::AgentClient& agent, const std::string& exec_id) {
  v1::SignalProcessRequest kill;
  kill.set_exec_id(exec_id);
  kill.set_signal(SIGKILL);
  kill.set_all(true);
  (void)agent.SignalProcess(kill);
  v1::WaitProcessRequest wait;
  wait.set_exec_id(exec_id);
  (void)agent.WaitProcess(wait, kRemoveWait);
  v1::RemoveProcessRequest remove;
  remove.set_exec_id(exec_id);
  return agent.RemoveProcess(remove);
}

// The caller's stdin to the process on a thread of its own, so a command
// that does not read never holds up signals or the exit. Ends at end of
// file (CloseStdin), when a write fails (the process closed its stdin or
// exited; CloseStdin too, so nothing waits for more), or when stopped.
class StdinCopy {
 public:
  StdinCopy(agentclient::AgentClient& agent, std::string exec_id, int in)
      : agent_(agent), exec_id_(std::move(exec_id)), in_(in), stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~StdinCopy() {
    const uint64_t one = 1;
    if (stop_) (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
  StdinCopy(const StdinCopy&) = delete;
  StdinCopy& operator=(const StdinCopy&) = delete;

 private:
  void Run() {
    for (;;) {
      pollfd p[2] = {{in_, POLLIN, 0}, {stop_.get(), POLLIN, 0}};
      if (::poll(p, stop_ ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[1].revents) return;  // stopped: the process is gone, nothing to close
      char buf[kChunk];
      const ssize_t n = ::read(in_, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      v1::WriteStreamRequest req;
      req.set_exec_id(exec_id_);
      req.set_data(buf, static_cast<size_t>(n));
      if (!agent_.WriteStdin(req).ok()) break;
    }
    v1::CloseStdinRequest close;
    close.set_exec_id(exec_id_);
    (void)agent_.CloseStdin(close);
  }

  agentclient::AgentClient& agent_;
  const std::string exec_id_;
  const int in_;
  UniqueFd stop_;
  std::thread thread_;
};

}  // namespace

std::string GuestProcessJson(const ExecOptions& o) {
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"};
  if (o.tty) env.push_back("TERM=" + o.term);
  for (const std::string& kv : o.env) {
    const std::string key = kv.substr(0, kv.find('='));
    std::erase_if(env, [&](const std::string& e) { return e.substr(0, e.find('=')) == key; });
    env.push_back(kv);
  }
  nlohmann::json p = {{"args", o.args}, {"env", env}, {"cwd", o.cwd}, {"terminal", o.tty},
                      {"user", {{"uid", 0}, {"gid", 0}}}};
  if (o.tty && o.size) p["consoleSize"] = {{"height", o.size->rows}, {"width", o.size->cols}};
  return p.dump();
}

SessionResult RunGuestExec(agentclient::AgentClient& agent, const ExecOptions& o, const SessionFds& fds) {
  SessionResult result;
  UniqueFd exited(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!exited) {
    result.status = ErrnoStatus("eventfd");
    return result;
  }
  const std::string exec_id = NewExecId();
  v1::ExecGuestProcessRequest start;
  start.set_exec_id(exec_id);
  start.set_process_json(GuestProcessJson(o));
  start.set_tools_container_id(o.tools_container);
  start.set_tools_as_guest_root(o.tools_as_root);
  auto started = agent.ExecGuestProcess(start);
  if (!started.ok()) {
    result.status = started.status();
    // No answer is not "not started": the agent may have started it after
    // all. Whatever it did is ended, best effort.
    const Code c = started.status().code();
    if (c == Code::kDeadlineExceeded || c == Code::kUnavailable || c == Code::kCancelled)
      (void)KillAndRemove(agent, exec_id);
    return result;
  }
  result.started = true;

  std::optional<Result<v1::WaitProcessResponse>> wait_result;
  std::mutex wait_mu;
  std::thread waiter([&] {
    v1::WaitProcessRequest req;
    req.set_exec_id(exec_id);
    auto r = agent.WaitProcess(req);
    {
      std::lock_guard lock(wait_mu);
      wait_result = std::move(r);
    }
    const uint64_t one = 1;
    (void)!::write(exited.get(), &one, sizeof one);
  });
  Pending copying(o.tty ? 1 : 2);
  std::thread out([&] {
    CopyOutput(agent, exec_id, false, fds.out);
    copying.Done();
  });
  std::thread err;
  if (!o.tty) {
    err = std::thread([&] {
      CopyOutput(agent, exec_id, true, fds.err);
      copying.Done();
    });
  }
  std::optional<StdinCopy> stdin_copy;
  if (o.pass_stdin) {
    stdin_copy.emplace(agent, exec_id, fds.in);
  } else if (!o.tty) {
    v1::CloseStdinRequest req;
    req.set_exec_id(exec_id);
    (void)agent.CloseStdin(req);
  }

  // Until the command exits, or the caller insists (a second signal), or
  // the agent no longer answers a signal, or the command runs past
  // o.timeout: then it is killed and, if the guest does not confirm within
  // o.give_up_wait, the connection is closed.
  int interrupts = 0;
  bool give_up = false;
  const auto deadline = o.timeout ? std::optional(std::chrono::steady_clock::now() + *o.timeout) : std::nullopt;
  while (!give_up) {
    int wait_ms = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<milliseconds>(*deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    pollfd pfds[2] = {{exited.get(), POLLIN, 0}, {fds.signals, POLLIN, 0}};
    const int ready = ::poll(pfds, fds.signals >= 0 ? 2 : 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      result.status = ErrnoStatus("poll");
      give_up = true;
      break;
    }
    if (pfds[0].revents) break;
    if (ready == 0) {
      result.timed_out = true;
      v1::SignalProcessRequest kill;
      kill.set_exec_id(exec_id);
      kill.set_signal(SIGKILL);
      kill.set_all(true);
      (void)agent.SignalProcess(kill);
      give_up = true;
      break;
    }
    int sig = 0;
    while (!give_up && (sig = BlockedSignals::NextFrom(fds.signals)) != 0) {
      if (sig == SIGWINCH) {
        auto size = fds.terminal >= 0 ? TerminalSize(fds.terminal) : std::nullopt;
        if (o.tty && size) {
          v1::TtyWinResizeRequest req;
          req.set_exec_id(exec_id);
          req.set_row(size->rows);
          req.set_column(size->cols);
          (void)agent.TtyWinResize(req);
        }
        continue;
      }
      v1::SignalProcessRequest req;
      req.set_exec_id(exec_id);
      req.set_signal(++interrupts == 1 ? static_cast<uint32_t>(sig) : SIGKILL);
      req.set_all(true);
      Status sent = agent.SignalProcess(req);
      if (interrupts > 1 || (!sent.ok() && sent.code() != Code::kNotFound)) give_up = true;
    }
  }
  if (give_up) {
    pollfd p{exited.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(o.give_up_wait.count())) <= 0) agent.Close();  // ends the wait and the reads
  }
  waiter.join();
  stdin_copy.reset();
  (void)copying.WaitFor(kDrainGrace);
  // Removing it kills what it left running (and wakes the copies); a
  // process the agent still calls running is killed first.
  v1::RemoveProcessRequest remove;
  remove.set_exec_id(exec_id);
  Status removed = agent.RemoveProcess(remove);
  if (!removed.ok() && removed.code() == Code::kFailedPrecondition) removed = KillAndRemove(agent, exec_id);
  if (!copying.WaitFor(kDrainGrace)) agent.Close();  // cancels the reads still blocked
  out.join();
  if (err.joinable()) err.join();

  std::lock_guard lock(wait_mu);
  if (result.timed_out && result.status.ok())
    result.status = DeadlineExceeded(fmt::format("the command ran past its {} s; it was killed",
                                                 std::chrono::duration_cast<std::chrono::seconds>(*o.timeout).count()));
  if (result.status.ok() && wait_result && !wait_result->ok()) result.status = wait_result->status();
  if (result.status.ok() && !removed.ok()) result.status = removed.WithContext("remove the guest process");
  if (result.status.ok() && wait_result && wait_result->ok()) {
    // The guest is untrusted: an exit status no process can have is an error,
    // not a code passed on (the kernel would keep its low 8 bits only).
    const int32_t st = (*wait_result)->status();
    if (st < 0 || st > 255)
      result.status = InvalidArgument("the guest reported exit status " + std::to_string(st) + ", outside 0..255");
    else
      result.exit_status = st;
  }
  return result;
}

}  // namespace capsule::guestexec
