// Double-fork daemon spawning with a race-free pidfd, and re-identification
// of a daemon by (pid, start time, boot id). Between fork and exec only
// async-signal-safe calls are made; everything is allocated before fork.
#include "runtime/host/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "runtime/common/child_setup.h"
#include "runtime/common/drop_user.h"
#include "runtime/common/file_util.h"
#include "runtime/common/reaper.h"
#include "runtime/common/subprocess.h"
#include "runtime/host/proc_stat.h"

namespace capsule {
namespace {

// Records sent from the forked processes to the launcher over a CLOEXEC pipe.
enum Record : int { kPid = 1, kError = 2 };
enum Step : int {
  kSetsid = 1, kFork, kUnshareNet, kExec, kUnshareMnt, kPrivateMounts, kTap, kSetgroups, kSetgid, kSetuid,
  kNoNewPrivs, kNoHugePages,
  kSetUp = 100,      // + the ChildStep that failed (child_setup.h names it)
  kJailStep = 1000,  // + the index of the jail step that failed
};

const char* StepName(int step) {
  switch (step) {
    case kSetsid: return "setsid";
    case kFork: return "second fork";
    case kUnshareNet: return "unshare its network namespace";
    case kUnshareMnt: return "unshare its mount namespace";
    case kPrivateMounts: return "make its mounts private";
    case kTap: return "create a tap in its network namespace";
    case kSetgroups: return "set its supplementary groups";
    case kSetgid: return "set its gid";
    case kSetuid: return "set its uid";
    case kNoNewPrivs: return "set no_new_privs";
    case kNoHugePages: return "turn transparent huge pages off";
    default:
      if (step >= kSetUp && step < kJailStep) return ChildStepName(static_cast<ChildStep>(step - kSetUp));
      return "exec";
  }
}

std::string FailedStep(const DaemonOptions& o, int step) {
  if (step >= kJailStep && o.jail && static_cast<size_t>(step - kJailStep) < o.jail->steps.size())
    return "enter its jail: " + o.jail->steps[static_cast<size_t>(step - kJailStep)].what;
  return StepName(step);
}

void SendRecord(int fd, int kind, int a, int b) {
  int data[3] = {kind, a, b};
  (void)!::write(fd, data, sizeof data);
}

[[noreturn]] void Fail(int report_fd, int step) {
  SendRecord(report_fd, kError, step, errno);
  ::_exit(127);
}

// A tap in the current netns, as an fd at `target` (async-signal-safe).
bool MakeTap(const DaemonOptions::Tap& t) {
  int fd = ::open("/dev/net/tun", O_RDWR);
  if (fd < 0) return false;
  ifreq ifr{};
  size_t n = t.name.size() < IFNAMSIZ - 1 ? t.name.size() : IFNAMSIZ - 1;
  std::memcpy(ifr.ifr_name, t.name.data(), n);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0 || ::dup2(fd, t.target_fd) < 0) {
    ::close(fd);
    return false;
  }
  if (fd != t.target_fd) ::close(fd);
  return true;
}

// Namespaces, taps, then the drop to an unprivileged uid: setuid from root
// to a non-zero uid clears every capability set (no SECBIT_KEEP_CAPS).
void Confine(const DaemonOptions& o, int report_fd) {
  if (o.no_huge_pages && ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) Fail(report_fd, kNoHugePages);
  if (o.new_net_namespace && ::unshare(CLONE_NEWNET) != 0) Fail(report_fd, kUnshareNet);
  if (o.new_mount_namespace) {
    if (::unshare(CLONE_NEWNS) != 0) Fail(report_fd, kUnshareMnt);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Fail(report_fd, kPrivateMounts);
  }
  for (const auto& t : o.taps) {
    if (!MakeTap(t)) Fail(report_fd, kTap);
  }
  if (o.jail) {
    const int failed = EnterJail(*o.jail);
    if (failed >= 0) Fail(report_fd, kJailStep + failed);
  }
  if (o.uid < 0) return;
  const auto gid = static_cast<gid_t>(o.gid < 0 ? o.uid : o.gid);
  switch (DropToUser(static_cast<uid_t>(o.uid), gid, o.groups.data(), o.groups.size())) {
    case DropStep::kDone: return;
    case DropStep::kSetgroups: Fail(report_fd, kSetgroups);
    case DropStep::kSetgid: Fail(report_fd, kSetgid);
    case DropStep::kSetuid: Fail(report_fd, kSetuid);
    case DropStep::kNoNewPrivs: Fail(report_fd, kNoNewPrivs);
  }
}

// Grandchild: becomes the daemon.
[[noreturn]] void ExecDaemon(const DaemonOptions& o, const ChildSetup& setup, char** argv, char** envp,
                             int report_fd, int exe_fd) {
  if (auto failed = SetUpChild(setup)) Fail(report_fd, kSetUp + static_cast<int>(*failed));
  Confine(o, report_fd);
  if (exe_fd >= 0) {
    ::syscall(SYS_execveat, exe_fd, "", argv, envp != nullptr ? envp : environ, AT_EMPTY_PATH);
  } else if (envp != nullptr) {
    ::execve(argv[0], argv, envp);
  } else {
    ::execv(argv[0], argv);
  }
  Fail(report_fd, kExec);
}

// Closes every fd above 2 but `keep` (sorted, ascending), async-signal-safe.
void CloseAllBut(const int* keep, size_t n) {
  unsigned from = 3;
  for (size_t i = 0; i < n; ++i) {
    const auto k = static_cast<unsigned>(keep[i]);
    if (k < from) continue;
    if (k > from) (void)::syscall(SYS_close_range, from, k - 1, 0U);
    from = k + 1;
  }
  (void)::syscall(SYS_close_range, from, ~0U, 0U);
}

// Intermediate: new session, forks the daemon, reports its pid, then waits
// until the launcher has opened a pidfd for it before exiting. The launcher
// says so with a byte, not by closing its end: an intermediate that another
// thread forked meanwhile holds a copy of that end until it exits (the pipe
// is CLOEXEC, and intermediates do not exec), so two spawns at once that
// waited for end of file each waited for the other, for ever.
// It first closes every fd but the ones it and the daemon's set-up use
// (`keep`): never exec'ing, it would otherwise hold the launcher's other
// fds while it waits, and a launcher killed meanwhile would leave them
// open a moment longer (a shim's listening socket then still completes
// connects, and containerd's `delete` took the dead shim for a live one).
// Our copy of go_write_fd goes with them: it would keep go_fd from ever
// reading end of file.
[[noreturn]] void Intermediate(const DaemonOptions& o, const ChildSetup& setup, char** argv, char** envp,
                               int report_fd, int go_fd, int exe_fd, const int* keep, size_t keep_count) {
  CloseAllBut(keep, keep_count);
  if (::setsid() < 0) Fail(report_fd, kSetsid);
  pid_t pid = ::fork();
  if (pid < 0) Fail(report_fd, kFork);
  if (pid == 0) ExecDaemon(o, setup, argv, envp, report_fd, exe_fd);
  SendRecord(report_fd, kPid, pid, 0);
  char b;
  while (::read(go_fd, &b, 1) < 0 && errno == EINTR) {
  }
  ::_exit(0);  // on the byte, or at end of file when the launcher died
}

bool ReadRecord(int fd, int (&data)[3]) {
  ssize_t n;
  do {
    n = ::read(fd, data, sizeof data);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof data);
}

void ReapIntermediate(pid_t pid) {
  if (Reaper::Instance().active()) {
    (void)Reaper::Instance().WaitStatus(pid, std::chrono::steady_clock::now() + std::chrono::seconds(10));
    return;
  }
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Result<Daemon> SpawnDaemon(const DaemonOptions& options) {
  DaemonOptions o = options;  // the jail may add the program's fd to keep_fds
  if (o.argv.empty()) return InvalidArgument("spawn daemon: empty argv");
  if (!o.taps.empty() && !o.new_net_namespace)
    return InvalidArgument("spawn " + o.argv[0] + ": taps are made only in a network namespace of its own");
  for (const auto& t : o.taps) {
    if (t.name.empty() || t.name.size() >= 16 || t.target_fd <= 2)
      return InvalidArgument("spawn " + o.argv[0] + ": tap '" + t.name + "' needs a name of 1..15 bytes and an fd above 2");
  }
  const std::string& prog = o.argv[0];
  if (::access(prog.c_str(), X_OK) != 0) return ErrnoStatus("spawn " + prog);
  std::vector<char*> argv = CStrings(o.argv);
  std::vector<char*> envp;
  if (o.env) envp = CStrings(*o.env);
  if (o.jail && !o.new_mount_namespace)
    return InvalidArgument("spawn " + prog + ": a jail needs a mount namespace of its own");
  UniqueFd exe;
  if (o.jail) {
    // The program need not be in the jail: it runs from this fd. A script
    // ("#!") is read by its interpreter through /dev/fd/N, so the fd
    // survives the exec then; a binary's closes with it.
    exe.reset(::open(prog.c_str(), O_RDONLY | O_CLOEXEC));
    if (!exe) return ErrnoStatus("spawn " + prog + ": open the program for its jail");
    char magic[2] = {};
    if (::pread(exe.get(), magic, sizeof magic, 0) == 2 && magic[0] == '#' && magic[1] == '!')
      o.keep_fds.push_back(exe.get());
  }

  UniqueFd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!dev_null) return ErrnoStatus("open /dev/null");
  // stdin is /dev/null; everything above stderr but keep_fds closes on exec.
  ChildSetup setup;
  setup.stdio[1] = o.stdout_fd;
  setup.stdio[2] = o.stderr_fd;
  setup.dev_null = dev_null.get();
  setup.close_other_fds = true;
  setup.keep_fds = o.keep_fds.data();
  setup.keep_count = o.keep_fds.size();
  setup.default_signal_handlers = true;
  setup.cwd = o.cwd.c_str();
  int rp[2], gp[2];
  if (::pipe2(rp, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd report_read(rp[0]), report_write(rp[1]);
  if (::pipe2(gp, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd go_read(gp[0]), go_write(gp[1]);

  std::vector<int> mid_keep = {report_write.get(), go_read.get(), exe.get(), dev_null.get(), o.stdout_fd, o.stderr_fd};
  mid_keep.insert(mid_keep.end(), o.keep_fds.begin(), o.keep_fds.end());
  for (const auto& t : o.taps) mid_keep.push_back(t.target_fd);
  std::erase_if(mid_keep, [](int fd) { return fd < 0; });
  std::sort(mid_keep.begin(), mid_keep.end());

  pid_t mid = ::fork();
  if (mid < 0) return ErrnoStatus("fork for " + prog);
  if (mid == 0) {
    Intermediate(o, setup, argv.data(), o.env ? envp.data() : nullptr, report_write.get(), go_read.get(), exe.get(),
                 mid_keep.data(), mid_keep.size());
  }
  report_write.reset();
  go_read.reset();

  int rec[3] = {0, 0, 0};
  Daemon d;
  bool got = ReadRecord(report_read.get(), rec);
  if (got && rec[0] == kPid) {
    d.pid = rec[1];
    // The daemon is the intermediate's child and the intermediate is blocked
    // on go_fd, so nobody can have reaped it yet: the pidfd names it.
    auto pidfd = OpenPidfd(d.pid);
    if (pidfd.ok()) {
      d.pidfd = std::move(*pidfd);
    } else {
      // Unsupervised it must not run: the pid is still certainly the daemon's.
      ::kill(d.pid, SIGKILL);
    }
  }
  const char go = 1;
  while (::write(go_write.get(), &go, 1) < 0 && errno == EINTR) {
  }
  go_write.reset();
  ReapIntermediate(mid);
  if (!got) return Internal("spawn " + prog + ": launcher process died before reporting");
  if (rec[0] == kError) return ErrnoStatus("spawn " + prog + ": " + FailedStep(o, rec[1]), rec[2]);
  // EOF: the daemon exec'd (the pipe is CLOEXEC); a record: exec failed.
  if (ReadRecord(report_read.get(), rec) && rec[0] == kError)
    return ErrnoStatus("spawn " + prog + ": " + FailedStep(o, rec[1]), rec[2]);
  if (!d.pidfd) return Internal("spawn " + prog + ": could not open a pidfd for pid " + std::to_string(d.pid));
  return d;
}

bool HaveEffectiveCapabilities(std::initializer_list<int> caps) {
  auto status = ReadFile("/proc/self/status");
  if (!status.ok()) return false;
  const size_t at = status->find("\nCapEff:");
  if (at == std::string::npos) return false;
  const uint64_t eff = std::strtoull(status->c_str() + at + 8, nullptr, 16);
  for (int c : caps)
    if (c < 0 || c > 63 || (eff >> c & 1) == 0) return false;
  return true;
}

std::string CurrentBootId() {
  auto id = ReadFile("/proc/sys/kernel/random/boot_id");
  if (!id.ok()) return "";
  std::string s = std::move(*id);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Result<ProcessIdentity> IdentifyProcess(pid_t pid) {
  ASSIGN_OR_RETURN(ProcStat stat, ReadProcStat(pid));
  return ProcessIdentity{pid, stat.start_time, CurrentBootId()};
}

namespace {

// The guard's order: the pidfd first, then `is_it`, then the pidfd's exit.
Result<UniqueFd> OpenProcessIf(pid_t pid, const std::function<Status(pid_t)>& is_it) {
  const std::string who = "pid " + std::to_string(pid);
  if (pid <= 0) return InvalidArgument("invalid " + who);
  auto fd = OpenPidfd(pid);
  if (!fd.ok()) {
    if (fd.status().code() == Code::kNotFound) return NotFound(who + " has exited");
    return fd.status();
  }
  RETURN_IF_ERROR(is_it(pid));
  if (PidfdExited(fd->get())) return NotFound(who + " has exited");
  return fd;
}

}  // namespace

Result<UniqueFd> OpenProcess(const ProcessIdentity& id) {
  if (id.pid > 0 && !id.boot_id.empty() && id.boot_id != CurrentBootId())
    return NotFound("pid " + std::to_string(id.pid) + " belongs to an earlier boot");
  return OpenProcessIf(id.pid, [&](pid_t pid) {
    auto now = IdentifyProcess(pid);
    if (!now.ok() || now->start_time != id.start_time)
      return NotFound("pid " + std::to_string(pid) + " now names another process (start time differs)");
    return Status::Ok();
  });
}

Result<UniqueFd> OpenProcessWithArgument(pid_t pid, std::string_view suffix) {
  return OpenProcessIf(pid, [&](pid_t p) {
    auto args = ReadCmdline(p);
    if (args.ok() && std::any_of(args->begin(), args->end(), [&](const std::string& a) { return a.ends_with(suffix); }))
      return Status::Ok();
    return NotFound(fmt::format("pid {} now names another process (no argument ends with '{}')", p, suffix));
  });
}

bool PidfdExited(int pidfd) { return PidfdWait(pidfd, 0); }

bool PidfdWait(int pidfd, int timeout_ms) {
  pollfd p{pidfd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

Status PidfdSignal(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) != 0) {
    if (errno == ESRCH) return Status::Ok();  // already gone: nothing to signal
    return ErrnoStatus("pidfd_send_signal " + std::to_string(sig));
  }
  return Status::Ok();
}

std::string ReadLogTail(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return "";
  size_t size = static_cast<size_t>(st.st_size);
  size_t want = std::min(size, max_bytes);
  std::string out(want, '\0');
  ssize_t n = ::pread(fd.get(), out.data(), want, static_cast<off_t>(size - want));
  if (n <= 0) return "";
  out.resize(static_cast<size_t>(n));
  if (want < size) {
    size_t nl = out.find('\n');
    if (nl != std::string::npos && nl + 1 < out.size()) out.erase(0, nl + 1);
  }
  return out;
}

}  // namespace capsule
