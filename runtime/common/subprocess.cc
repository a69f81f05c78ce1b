// fork/exec with fd plumbing, exec-failure reporting through a CLOEXEC pipe,
// and pidfd-based waiting.
#include "runtime/common/subprocess.h"

#include "runtime/common/child_setup.h"
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

// What a child reports before it exits 127, with errno.
enum Step : int { kPdeathsig = 1, kSetsid, kDropUser, kExec, kSetUp = 100 /* + ChildStep */ };

// Child side between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(const SpawnOptions& o, const ChildSetup& setup, char** argv, char** envp, int err_fd) {
  // The error pipe must survive the extra fds' placement: lift it above
  // every target.
  if (setup.extra_count > 0) {
    const int moved = ::fcntl(err_fd, F_DUPFD_CLOEXEC, ChildFdFloor(setup));
    if (moved < 0) ::_exit(127);
    err_fd = moved;
  }
  auto fail = [err_fd](int step) {
    int data[2] = {step, errno};
    (void)!::write(err_fd, data, sizeof data);
    ::_exit(127);
  };
  if (o.die_with_parent && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(kPdeathsig);
  if (o.new_session && ::setsid() < 0) fail(kSetsid);
  if (auto failed = SetUpChild(setup)) fail(kSetUp + static_cast<int>(*failed));
  if (o.uid >= 0 && DropToUser(static_cast<uid_t>(o.uid), static_cast<gid_t>(o.gid < 0 ? o.uid : o.gid), nullptr, 0) !=
                        DropStep::kDone)
    fail(kDropUser);
  if (envp != nullptr) {
    ::execve(argv[0], argv, envp);
  } else {
    ::execv(argv[0], argv);
  }
  fail(kExec);
  ::_exit(127);
}

// How long Spawn waits for the Reaper to publish the status of a child that
// was reaped before its pidfd could be opened (it is being stored then).
constexpr std::chrono::milliseconds kReapedStatusWait{1000};

std::string StepName(int step) {
  switch (step) {
    case kPdeathsig: return "prctl(PDEATHSIG)";
    case kSetsid: return "setsid";
    case kDropUser: return "drop to its user";
    case kExec: return "exec";
  }
  return ChildStepName(static_cast<ChildStep>(step - kSetUp));
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
  ChildSetup setup;
  setup.stdio[0] = o.stdin_fd;
  setup.stdio[1] = o.stdout_fd;
  setup.stdio[2] = o.stderr_fd;
  setup.keep_fds = o.keep_fds.data();
  setup.keep_count = o.keep_fds.size();
  setup.extra_fds = o.extra_fds.data();
  setup.extra_count = o.extra_fds.size();
  setup.scratch = scratch.data();
  setup.cwd = o.cwd.c_str();

  UniqueFd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!dev_null) return ErrnoStatus("open /dev/null");
  setup.dev_null = dev_null.get();
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd err_read(pipefd[0]);
  UniqueFd err_write(pipefd[1]);

  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork for " + prog);
  if (pid == 0) {
    ExecChild(o, setup, argv.data(), o.env ? envp.data() : nullptr, err_write.get());
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
