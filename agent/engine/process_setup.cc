// Child-side process settings. Runs in the container process (a clone of a
// single-threaded intermediate), so allocation is safe here.
#include "agent/engine/process_setup.h"
#include "runtime/common/reasons.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/close_range.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace capsule::engine {
namespace {

// Signals the kernel knows on x86_64 (_NSIG in linux/signal.h).
constexpr int kKernelSignals = 64;

// From runc/containerd: what a container gets when its env has no PATH.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string EnvPath(const std::vector<std::string>& env) {
  for (const auto& e : env) {
    if (e.rfind("PATH=", 0) == 0) return e.substr(5);
  }
  return kDefaultPath;
}

}  // namespace

Result<ProcessPlan> PlanProcess(const oci::Process& p, const std::optional<oci::Seccomp>& seccomp) {
  ProcessPlan plan;
  plan.args = p.args;
  plan.env = p.env;
  plan.cwd = p.cwd;
  plan.uid = p.user.uid;
  plan.gid = p.user.gid;
  plan.additional_gids.assign(p.user.additional_gids.begin(), p.user.additional_gids.end());
  if (p.user.umask) plan.umask = static_cast<mode_t>(*p.user.umask);
  plan.rlimits = p.rlimits;
  plan.no_new_privileges = p.no_new_privileges;
  plan.oom_score_adj = p.oom_score_adj;
  plan.capabilities = PlanCapabilities(p.capabilities, ReadLastCap());
  plan.terminal = p.terminal;
  plan.console_size = p.console_size;
  if (seccomp) {
    ASSIGN_OR_RETURN(plan.seccomp, CompileSeccomp(*seccomp));
  }
  return plan;
}

Status WriteOomScoreAdj(const ProcessPlan& plan) {
  if (!plan.oom_score_adj) return Status::Ok();
  int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open /proc/self/oom_score_adj");
  std::string v = std::to_string(*plan.oom_score_adj);
  ssize_t n = ::write(fd, v.data(), v.size());
  int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoStatus("write oom_score_adj " + v, err);
  return Status::Ok();
}

Status ApplyRlimits(const ProcessPlan& plan) {
  for (const auto& r : plan.rlimits) {
    rlimit lim{r.soft, r.hard};
    if (::setrlimit(static_cast<__rlimit_resource>(r.resource), &lim) != 0)
      return ErrnoStatus("setrlimit " + r.type + " soft=" + std::to_string(r.soft) + " hard=" + std::to_string(r.hard));
  }
  return Status::Ok();
}

Status ApplyCredentials(const ProcessPlan& plan) {
  if (plan.seccomp && !plan.no_new_privileges) RETURN_IF_ERROR(LoadSeccomp(*plan.seccomp));
  RETURN_IF_ERROR(DropBoundingSet(plan.capabilities));
  if (::setgroups(plan.additional_gids.size(), plan.additional_gids.data()) != 0)
    return ErrnoStatus("setgroups");
  // Keep the permitted set across the uid change; capset trims it after.
  if (plan.capabilities.apply && ::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
    return ErrnoStatus("prctl(PR_SET_KEEPCAPS)");
  if (::setresgid(plan.gid, plan.gid, plan.gid) != 0) return ErrnoStatus("setresgid " + std::to_string(plan.gid));
  if (::setresuid(plan.uid, plan.uid, plan.uid) != 0) return ErrnoStatus("setresuid " + std::to_string(plan.uid));
  if (plan.capabilities.apply && ::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0)
    return ErrnoStatus("prctl(PR_SET_KEEPCAPS, 0)");
  RETURN_IF_ERROR(ApplyCapabilities(plan.capabilities));
  ::umask(plan.umask.value_or(022));
  if (::chdir(plan.cwd.c_str()) != 0) return ErrnoStatus("chdir to cwd " + plan.cwd);
  return Status::Ok();
}

Result<std::string> ResolveExecutable(const ProcessPlan& plan) {
  const std::string& name = plan.args[0];
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) {
      const int err = errno;
      Status st = ErrnoStatus("exec \"" + name + "\"", err);
      return err == ENOENT ? std::move(st).WithReason(reason::kExecutableNotFound) : st;
    }
    return name;
  }
  std::string path = EnvPath(plan.env);
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = std::min(path.find(':', pos), path.size());
    std::string dir = path.substr(pos, colon - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    pos = colon + 1;
  }
  return NotFound("exec \"" + name + "\": executable file not found in $PATH (" + path + ")")
      .WithReason(reason::kExecutableNotFound);
}

Status ExecUserProcess(const ProcessPlan& plan, const std::string& path) {
  if (plan.no_new_privileges && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return ErrnoStatus("prctl(PR_SET_NO_NEW_PRIVS)");
  if (plan.seccomp && plan.no_new_privileges) RETURN_IF_ERROR(LoadSeccomp(*plan.seccomp));
  // Every fd but 0-2 closes at exec, including the sync socket: the parent
  // sees end-of-stream as "exec succeeded".
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  std::vector<char*> argv = CStrings(plan.args);
  std::vector<char*> envp = CStrings(plan.env);
  ::execve(path.c_str(), argv.data(), envp.data());
  return ErrnoStatus("exec \"" + path + "\"");
}

void ResetSignals() {
  // Raw syscalls, not glibc: glibc refuses to touch the two real-time
  // signals it reserves for itself (32, 33), and a supervisor that ignored
  // them would otherwise pass that on to every container.
  struct KernelSigaction {
    uintptr_t handler;
    unsigned long flags;
    uintptr_t restorer;
    uint64_t mask;
  } dfl{};  // handler 0 == SIG_DFL
  for (int sig = 1; sig <= kKernelSignals; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    (void)::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof(uint64_t));
  }
  const uint64_t none = 0;
  (void)::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof(uint64_t));
}

void CloseAllExcept(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned int next = 3;
  for (int fd : keep) {
    if (fd < static_cast<int>(next)) continue;
    if (static_cast<unsigned int>(fd) > next) ::syscall(SYS_close_range, next, static_cast<unsigned int>(fd) - 1, 0U);
    next = static_cast<unsigned int>(fd) + 1;
  }
  ::syscall(SYS_close_range, next, ~0U, 0U);
}

}  // namespace capsule::engine
