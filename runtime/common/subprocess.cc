// fork/exec with fd plumbing, exec-failure reporting through a CLOEXEC pipe,
// and pidfd-based waiting.
#include "runtime/common/subprocess.h"

#include "runtime/common/drop_user.h"
#include "runtime/common/reaper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace capsule {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Lowest fd number above every extra_fds target.
int ExtraFdFloor(const SpawnOptions& o) {
  int floor = 3;
  for (const auto& [child_fd, parent_fd] : o.extra_fds) floor = std::max(floor, child_fd + 1);
  return floor;
}

// Places extra_fds at their child numbers. Sources first move above every
// target so no dup2 clobbers a source still needed; `scratch` is
// preallocated by the parent (no malloc after fork). Returns false on error.
bool PlaceExtraFds(const SpawnOptions& o, int* scratch) {
  const int floor = ExtraFdFloor(o);
  for (size_t i = 0; i < o.extra_fds.size(); ++i) {
    scratch[i] = ::fcntl(o.extra_fds[i].second, F_DUPFD_CLOEXEC, floor);
    if (scratch[i] < 0) return false;
  }
  for (size_t i = 0; i < o.extra_fds.size(); ++i) {
    // dup2 onto a different number clears CLOEXEC on the new descriptor.
    if (::dup2(scratch[i], o.extra_fds[i].first) < 0) return false;
  }
  return true;
}

// Child side between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(const SpawnOptions& o, char** argv, char** envp, int err_fd,
                            int dev_null, int* scratch) {
  // The error pipe must survive PlaceExtraFds: lift it above every target.
  if (!o.extra_fds.empty()) {
    const int moved = ::fcntl(err_fd, F_DUPFD_CLOEXEC, ExtraFdFloor(o));
    if (moved < 0) ::_exit(127);
    err_fd = moved;
  }
  auto fail = [err_fd](int step) {
    int data[2] = {step, errno};
    (void)!::write(err_fd, data, sizeof data);
    ::_exit(127);
  };
  if (o.die_with_parent && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(1);
  if (o.new_session && ::setsid() < 0) fail(2);
  // Move the requested stdio fds out of the 0..2 range first so dup2 order
  // cannot clobber one with another.
  int src[3] = {o.stdin_fd, o.stdout_fd, o.stderr_fd};
  for (int& fd : src) {
    if (fd < 0) fd = dev_null;
    if (fd <= 2) {
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) fail(3);
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(src[i], i) < 0) fail(4);
  }
  for (int fd : o.keep_fds) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) fail(5);
  }
  if (!PlaceExtraFds(o, scratch)) fail(5);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) fail(6);
  if (o.uid >= 0 && DropToUser(static_cast<uid_t>(o.uid), static_cast<gid_t>(o.gid < 0 ? o.uid : o.gid), nullptr, 0) !=
                        DropStep::kDone)
    fail(8);
  if (envp != nullptr) {
    ::execve(argv[0], argv, envp);
  } else {
    ::execv(argv[0], argv);
  }
  fail(7);
  ::_exit(127);
}

// How long Spawn waits for the Reaper to publish the status of a child that
// was reaped before its pidfd could be opened (it is being stored then).
constexpr std::chrono::milliseconds kReapedStatusWait{1000};

const char* StepName(int step) {
  switch (step) {
    case 1: return "prctl(PDEATHSIG)";
    case 2: return "setsid";
    case 3: case 4: return "set up stdio";
    case 5: return "pass fds";
    case 6: return "chdir";
    case 8: return "drop to its user";
    default: return "exec";
  }
}

}  // namespace

Result<UniqueFd> OpenPidfd(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return ErrnoStatus("pidfd_open " + std::to_string(pid));
  return UniqueFd(fd);
}

Result<ChildProcess> ChildProcess::Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return InvalidArgument("spawn: empty argv");
  const std::string& prog = o.argv[0];
  if (::access(prog.c_str(), X_OK) != 0) return ErrnoStatus("spawn " + prog);

  std::vector<char*> argv = CStrings(o.argv);
  std::vector<char*> envp;
  if (o.env) envp = CStrings(*o.env);
  for (const auto& [child_fd, parent_fd] : o.extra_fds) {
    if (child_fd < 3 || parent_fd < 3)
      return InvalidArgument("spawn " + prog + ": extra_fds must map fds > 2 to fds > 2");
  }
  std::vector<int> scratch(o.extra_fds.size() + 1);

  UniqueFd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!dev_null) return ErrnoStatus("open /dev/null");
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd err_read(pipefd[0]);
  UniqueFd err_write(pipefd[1]);

  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork for " + prog);
  if (pid == 0) {
    ExecChild(o, argv.data(), o.env ? envp.data() : nullptr, err_write.get(), dev_null.get(),
              scratch.data());
  }
  err_write.reset();

  int data[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(err_read.get(), data, sizeof data);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return ErrnoStatus(std::string("spawn ") + prog + ": " + StepName(data[0]), data[1]);
  }
  auto pidfd = OpenPidfd(pid);
  if (!pidfd.ok() && Reaper::Instance().active()) {
    // With the Reaper running (PID 1: the agent), a child that exits at
    // once can be reaped before pidfd_open sees it (ESRCH); its status then
    // waits in the Reaper. Hand back an exited child whose "pidfd" (an
    // eventfd holding 1) is readable, as an exited child's pidfd would be.
    if (auto st = Reaper::Instance().WaitStatus(pid, std::chrono::steady_clock::now() + kReapedStatusWait)) {
      UniqueFd readable(::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK));
      if (!readable) return ErrnoStatus("eventfd for the exited child " + std::to_string(pid));
      ChildProcess exited(pid, std::move(readable));
      exited.reaped_ = true;
      exited.wait_status_ = *st;
      return exited;
    }
  }
  if (!pidfd.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return pidfd.status();
  }
  return ChildProcess(pid, std::move(*pidfd));
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::move(other.pidfd_)),
      reaped_(other.reaped_),
      wait_status_(other.wait_status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    reaped_ = other.reaped_;
    wait_status_ = other.wait_status_;
  }
  return *this;
}

ChildProcess::~ChildProcess() { KillAndReap(); }

void ChildProcess::KillAndReap() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(pid_, SIGKILL);
  if (Reaper::Instance().active()) {
    (void)Reaper::Instance().WaitStatus(pid_, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  } else {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  reaped_ = true;
}

Status ChildProcess::Signal(int sig) {
  if (pid_ <= 0 || reaped_) return FailedPrecondition("process already exited");
  if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) != 0)
    return ErrnoStatus("signal pid " + std::to_string(pid_));
  return Status::Ok();
}

bool ChildProcess::TryReap() {
  if (reaped_) return true;
  if (pid_ <= 0) return true;
  if (Reaper::Instance().active()) {
    if (auto st = Reaper::Instance().TakeStatus(pid_)) {
      reaped_ = true;
      wait_status_ = *st;
    }
    return reaped_;
  }
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    wait_status_ = status;
  } else if (r < 0 && errno == ECHILD) {
    // Not our child any more (reaped elsewhere); treat as gone.
    reaped_ = true;
  }
  return reaped_;
}

Result<int> ChildProcess::Wait(std::optional<std::chrono::milliseconds> timeout) {
  if (pid_ <= 0) return FailedPrecondition("no process");
  auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                          : std::chrono::steady_clock::time_point::max();
  while (!TryReap()) {
    int wait_ms = -1;
    if (timeout) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return DeadlineExceeded("pid " + std::to_string(pid_) + " still running");
      wait_ms = static_cast<int>(left.count());
    }
    if (Reaper::Instance().active()) {
      // The reaper thread collects the status; wait for it to publish.
      auto until = timeout ? deadline : std::chrono::steady_clock::now() + std::chrono::seconds(1);
      if (auto st = Reaper::Instance().WaitStatus(pid_, until)) {
        reaped_ = true;
        wait_status_ = *st;
      }
      continue;
    }
    pollfd p{pidfd_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, wait_ms);
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll pidfd");
  }
  return wait_status_;
}

int ChildProcess::Terminate(std::chrono::milliseconds grace) {
  if (TryReap()) return wait_status_;
  (void)Signal(SIGTERM);
  if (Wait(grace).ok()) return wait_status_;
  (void)Signal(SIGKILL);
  (void)Wait();
  return wait_status_;
}

pid_t ChildProcess::Release() {
  pid_t p = pid_;
  pid_ = -1;
  pidfd_.reset();
  return p;
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

}  // namespace capsule
