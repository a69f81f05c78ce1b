// See containerd_leaks.h. Scans /proc, /proc/self/mountinfo, /var/run/netns
// and /sys/class/net/<bridge>/brif; cleans up with pidfds, umount2 and
// `ip link del`.
#include "tests/support/containerd_leaks.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/mount_table.h"
#include "runtime/host/daemon.h"
#include "tests/support/command.h"

namespace capsule::testing {
namespace {

// How long a SIGKILLed leftover may take to show its exit on the pidfd.
constexpr int kKillWaitMs = 5000;

// The command line of `pid` with NULs as spaces, if it names `needle`.
std::optional<std::string> CmdlineNaming(pid_t pid, const std::string& needle) {
  Result<std::string> cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
  if (!cmdline.ok() || cmdline->find(needle) == std::string::npos) return std::nullopt;
  std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
  return *cmdline;
}

std::string IpBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "ip";  // the spawn error then names it
}

// SIGKILL through a pidfd opened on the identity we checked, then wait for
// the exit so its mounts and sockets are released before we unmount.
Status KillLeftover(pid_t pid, const std::string& address) {
  Result<ProcessIdentity> id = IdentifyProcess(pid);
  if (!id.ok()) return Status::Ok();  // already gone
  Result<UniqueFd> pidfd = OpenProcess(*id);
  if (!pidfd.ok()) return Status::Ok();
  if (!CmdlineNaming(pid, address)) return Status::Ok();  // pid now names someone else
  RETURN_IF_ERROR_CTX(PidfdSignal(pidfd->get(), SIGKILL), fmt::format("kill leftover process {}", pid));
  if (!PidfdWait(pidfd->get(), kKillWaitMs)) {
    return DeadlineExceeded(fmt::format("leftover process {} still alive {} ms after SIGKILL", pid, kKillWaitMs));
  }
  return Status::Ok();
}

Status RemoveNetns(const std::string& path) {
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return ErrnoStatus("umount netns " + path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink netns " + path);
  return Status::Ok();
}

Status DeleteBridge(const std::string& bridge) {
  if (!PathExists("/sys/class/net/" + bridge)) return Status::Ok();  // no pod ever used it
  ASSIGN_OR_RETURN(CommandResult r, RunCommand({IpBinary(), "link", "del", bridge}, std::chrono::seconds(10)));
  if (!r.ok()) return Internal("ip link del " + bridge + ": " + r.err);
  return Status::Ok();
}

void KeepFirst(Status* first, Status next) {
  if (first->ok() && !next.ok()) *first = std::move(next);
}

}  // namespace

std::vector<std::string> DirEntries(const std::string& dir) { return ListDir(dir); }

Result<std::vector<std::string>> MountsUnder(const std::string& dir) { return capsule::MountsUnder(dir); }

Status UnmountUnder(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> targets, MountsUnder(dir));
  // Deepest first, so a mount never hides one below it.
  std::sort(targets.begin(), targets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  Status result;
  for (const auto& t : targets) {
    if (::umount2(t.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
      KeepFirst(&result, ErrnoStatus("umount " + t));
    }
  }
  return result;
}

ContainerdLeaks ScanLeaks(const LeakScope& scope) {
  ContainerdLeaks leaks;
  for (const std::string& entry : DirEntries("/proc")) {
    if (!std::isdigit(static_cast<unsigned char>(entry[0]))) continue;
    const pid_t pid = std::atoi(entry.c_str());
    if (pid == scope.daemon_pid || pid == ::getpid()) continue;
    if (auto cmdline = CmdlineNaming(pid, scope.address)) leaks.processes.emplace_back(pid, *cmdline);
  }
  if (Result<std::vector<std::string>> mounts = MountsUnder(scope.dir); mounts.ok()) leaks.mounts = *mounts;
  if (scope.bridge) {
    const std::string db = scope.metadata_db.empty() ? "" : ReadFile(scope.metadata_db).value_or("");
    for (const std::string& ns : DirEntries(scope.netns_dir)) {
      const bool is_new = ns.rfind("cni-", 0) == 0 &&
                          std::find(scope.netns_before.begin(), scope.netns_before.end(), ns) == scope.netns_before.end();
      const bool is_ours = scope.metadata_db.empty() || db.find(ns) != std::string::npos;
      if (is_new && is_ours) leaks.netns.push_back(scope.netns_dir + "/" + ns);
    }
    leaks.bridge_ports = DirEntries("/sys/class/net/" + *scope.bridge + "/brif");
  }
  return leaks;
}

std::vector<std::string> ContainerdLeaks::Describe(const LeakScope& scope) const {
  std::vector<std::string> out;
  for (const auto& [pid, cmdline] : processes) out.push_back(fmt::format("process {}: {}", pid, cmdline));
  for (const auto& m : mounts) out.push_back("mount " + m);
  for (const auto& n : netns) out.push_back("netns " + n);
  for (const auto& p : bridge_ports) out.push_back(fmt::format("port {} on bridge {}", p, scope.bridge.value_or("")));
  return out;
}

Status CleanUpLeaks(const LeakScope& scope) {
  const ContainerdLeaks leaks = ScanLeaks(scope);
  Status result;
  for (const auto& [pid, cmdline] : leaks.processes) KeepFirst(&result, KillLeftover(pid, scope.address));
  KeepFirst(&result, UnmountUnder(scope.dir));
  for (const auto& ns : leaks.netns) KeepFirst(&result, RemoveNetns(ns));
  if (scope.bridge) KeepFirst(&result, DeleteBridge(*scope.bridge));
  return result;
}

}  // namespace capsule::testing
