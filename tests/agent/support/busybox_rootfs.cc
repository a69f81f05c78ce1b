// Rootfs and spec builders for container tests.
#include "tests/agent/support/busybox_rootfs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "runtime/common/file_util.h"

namespace capsule::agent::testing {

Status BuildBusyboxRootfs(const std::string& root) {
  if (::chmod(root.c_str(), 0755) != 0) return ErrnoStatus("chmod " + root);
  for (const char* sub : {"bin", "proc", "sys", "dev", "tmp", "etc", "root"}) RETURN_IF_ERROR(MkdirAll(root + "/" + sub));
  ASSIGN_OR_RETURN(std::string busybox, ReadFile("/bin/busybox"));
  RETURN_IF_ERROR(WriteFileAtomic(root + "/bin/busybox", busybox, 0755));
  RETURN_IF_ERROR(WriteFile(root + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"));
  RETURN_IF_ERROR(WriteFile(root + "/etc/group", "root:x:0:\n"));
  FILE* list = ::popen("/bin/busybox --list", "r");
  if (list == nullptr) return ErrnoStatus("popen busybox --list");
  char name[256];
  while (std::fgets(name, sizeof name, list)) {
    std::string applet(name);
    applet.erase(applet.find_last_not_of("\n") + 1);
    if (!applet.empty() && applet != "busybox") (void)!::symlink("busybox", (root + "/bin/" + applet).c_str());
  }
  ::pclose(list);
  return Status::Ok();
}

nlohmann::json DefaultSpec(const std::vector<std::string>& args, const std::string& rootfs) {
  using nlohmann::json;
  json caps = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
               "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
               "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};
  return json{
      {"ociVersion", "1.0.2-dev"},
      {"root", {{"path", rootfs}, {"readonly", false}}},
      {"process",
       {{"args", args},
        {"env", {"PATH=/bin", "HOME=/root"}},
        {"cwd", "/"},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"capabilities",
         {{"bounding", caps}, {"effective", caps}, {"permitted", caps}, {"inheritable", json::array()}}}}},
      {"hostname", "capsule-test"},
      {"mounts",
       {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}, {"options", {"nosuid", "noexec", "nodev"}}},
        {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"},
         {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
        {{"destination", "/dev/pts"}, {"type", "devpts"}, {"source", "devpts"},
         {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}}},
        {{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"},
         {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}},
        {{"destination", "/dev/mqueue"}, {"type", "mqueue"}, {"source", "mqueue"},
         {"options", {"nosuid", "noexec", "nodev"}}},
        {{"destination", "/sys"}, {"type", "sysfs"}, {"source", "sysfs"}, {"options", {"nosuid", "noexec", "nodev", "ro"}}},
        {{"destination", "/sys/fs/cgroup"}, {"type", "cgroup"}, {"source", "cgroup"},
         {"options", {"nosuid", "noexec", "nodev", "relatime", "ro"}}},
        {{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid", "nodev", "mode=1777"}}}}},
      {"linux",
       {{"namespaces", {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}},
                        {{"type", "cgroup"}}, {{"type", "network"}, {"path", "/var/run/netns/cni-ignored"}}}},
        {"maskedPaths", {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                         "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
        {"readonlyPaths", {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}}};
}

}  // namespace capsule::agent::testing
