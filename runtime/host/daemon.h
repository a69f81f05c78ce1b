// Daemons: processes that outlive the process that started them (QEMU,
// virtiofsd), so that another Capsule process (the warm pool, a restarted
// shim, `shim delete`) can adopt them later. SpawnDaemon double-forks with
// setsid; ProcessIdentity re-finds the same process later without being
// fooled by pid reuse (pid + start time + boot id).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/host/jail.h"

namespace capsule {

struct DaemonOptions {
  std::vector<std::string> argv;                // argv[0] is the program path
  std::optional<std::vector<std::string>> env;  // nullopt: inherit ours
  // -1: /dev/null. stdin is always /dev/null.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Descriptors the daemon inherits at the same numbers. Every other
  // descriptor is closed on exec, even ones the caller left inheritable, so a
  // daemon never holds a pipe its launcher's parent waits on (containerd).
  std::vector<int> keep_fds;
  std::string cwd = "/";
  // unshare(CLONE_NEWNET) before exec: the daemon gets a network namespace
  // of its own with only a loopback (needs CAP_SYS_ADMIN).
  bool new_net_namespace = false;
  // unshare(CLONE_NEWNS) with every mount made private: mounts made on the
  // host later never reach the daemon (needs CAP_SYS_ADMIN).
  bool new_mount_namespace = false;
  // Taps made in the daemon's new network namespace (new_net_namespace)
  // before it runs and handed to it as `target_fd` (IFF_TAP | IFF_NO_PI |
  // IFF_VNET_HDR): a daemon that runs unprivileged cannot make its own.
  // target_fd must be a number the caller holds open (it is replaced).
  struct Tap {
    std::string name;
    int target_fd = -1;
  };
  std::vector<Tap> taps;
  // A root of its own (jail.h), entered after the taps are made and before
  // the uid drop; needs new_mount_namespace. The program is executed from
  // an fd opened before the pivot, so it need not be inside the jail (its
  // loader and libraries must be).
  std::optional<JailPlan> jail;
  // PR_SET_THP_DISABLE, which exec keeps: the daemon's memory is never
  // backed by transparent huge pages, even where it asks for them with
  // madvise (QEMU does, for its small RAM blocks and TCG's code buffer).
  bool no_huge_pages = false;
  // Drop to this uid and gid (supplementary groups: `groups`) after the
  // namespaces and taps are made, with no capabilities left and
  // no_new_privs set. -1: stay who we are.
  int64_t uid = -1;
  int64_t gid = -1;
  std::vector<gid_t> groups;
};

// A started daemon. It is not our child (the intermediate process exited),
// so it cannot be waited for; the pidfd is readable once it exits. The pidfd
// is opened before the daemon can possibly be reaped, so it always names it.
struct Daemon {
  pid_t pid = -1;
  UniqueFd pidfd;
};

// Whether this process holds every capability of `caps` (linux/capability.h
// numbers) in its effective set: what DaemonOptions' namespaces (CAP_SYS_ADMIN)
// and uid drop (CAP_SETUID, CAP_SETGID) need.
bool HaveEffectiveCapabilities(std::initializer_list<int> caps);

// fork -> setsid -> fork -> exec. Exec failures come back as errors naming
// the program and the step. Signal dispositions and mask are reset.
Result<Daemon> SpawnDaemon(const DaemonOptions& options);

// Who a process is, stable across pid reuse.
struct ProcessIdentity {
  pid_t pid = -1;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22, clock ticks after boot
  std::string boot_id;      // /proc/sys/kernel/random/boot_id
};

Result<ProcessIdentity> IdentifyProcess(pid_t pid);
// The current boot's id ("" if unreadable).
std::string CurrentBootId();

// The pid-reuse guard, one for every pid read from a file or /proc: a pidfd
// taken before the check that the pid still names the expected process, so
// nothing can reuse the pid between the check and what is done through the
// pidfd (signals, waits). NOT_FOUND when the process has exited, was
// reaped, or the pid now names another one.
// - by the start time recorded with the pid (and the boot):
Result<UniqueFd> OpenProcess(const ProcessIdentity& id);
// - by an argument of its command line that ends with `suffix`: a daemon
//   known by a path it was given (a socket, a log), whose start time was
//   never recorded.
Result<UniqueFd> OpenProcessWithArgument(pid_t pid, std::string_view suffix);
// True once the process behind `pidfd` has exited (POLLIN on the pidfd).
bool PidfdExited(int pidfd);
// Sends `sig` through the pidfd (never hits a recycled pid).
Status PidfdSignal(int pidfd, int sig);
// Waits up to `timeout_ms` (-1: forever) for the pidfd to show an exit.
bool PidfdWait(int pidfd, int timeout_ms);

// The last `max_bytes` of a log file, starting at a line boundary when one
// is near; "" when the file is missing. For error reports ("console tail").
std::string ReadLogTail(const std::string& path, size_t max_bytes = 4096);

}  // namespace capsule
