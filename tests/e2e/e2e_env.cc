// See e2e_env.h.
#include "tests/e2e/e2e_env.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "shim/launcher/socket.h"
#include "runtime/common/mount_table.h"

namespace capsule::testing {
namespace {

std::string BuildDir() {
  const char* b = std::getenv("CAPSULE_BUILD_DIR");
  return b != nullptr ? b : ".";
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] != '.') out.insert(e->d_name);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

// pid -> command line (NULs as spaces) of processes naming any needle.
std::vector<std::pair<pid_t, std::string>> ProcessesNaming(const std::vector<std::string>& needles) {
  std::vector<std::pair<pid_t, std::string>> out;
  const pid_t self = ::getpid();
  for (const std::string& name : Entries("/proc")) {
    if (!std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (pid == self) continue;
    auto cmdline = ReadFile("/proc/" + name + "/cmdline");
    if (!cmdline.ok() || cmdline->empty()) continue;
    std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
    for (const auto& n : needles) {
      if (!n.empty() && cmdline->find(n) != std::string::npos) {
        out.emplace_back(pid, *cmdline);
        break;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<pid_t, std::string>> E2eEnv::Processes(const std::vector<std::string>& needles) {
  return ProcessesNaming(needles);
}

std::string E2eEnv::ShimDir() { return BuildDir() + "/shim/cmd"; }

std::string E2eEnv::PathWithShim() {
  const char* path = std::getenv("PATH");
  return ShimDir() + ":" + (path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
}

std::string E2eEnv::ConfigYaml(bool boot_nic, const std::string& initrd, const std::string& kernel_params,
                               uint32_t agent_timeout_ms) const {
  // The pool socket is the test's own: a pool daemon another test (or the
  // host) runs must never hand this test's shims a VM.
  // CAPSULE_E2E_VSOCK_BACKEND runs a suite on another agent channel (serial:
  // the dense device set's), as a test may also set it for itself.
  const char* vsock = std::getenv("CAPSULE_E2E_VSOCK_BACKEND");
  const std::string vsock_yaml =
      vsock != nullptr && *vsock != '\0' ? fmt::format("vsock:\n  backend: {}\n", vsock) : std::string();
  // CAPSULE_E2E_DEVICE_SET=dense runs a suite on copy-on-write clones with
  // erofs disks instead of virtio-fs (guest.device_set).
  const char* devices = std::getenv("CAPSULE_E2E_DEVICE_SET");
  const std::string device_set = devices != nullptr && *devices != '\0' ? devices : "virtio-fs";
  return vsock_yaml + fmt::format(
      "hypervisor:\n  kernel_params: \"{}\"\n"
      "guest:\n  kernel: {}\n  initrd: {}\n  default_memory_mib: 256\n  boot_nic: {}\n  modules: {}\n"
      "  device_set: {}\n"
      "pool:\n  size: 1\n  socket: {}\n  cgroup: /capsule-pool-{}\n"
      "runtime:\n  state_dir: {}\n  boot_timeout_ms: 90000\n  agent_timeout_ms: {}\n  log_level: debug\n"
      "  image_cache_dir: {}\n",
      kernel_params, BuildDir() + "/deploy/vmlinux", initrd, boot_nic, BuildDir() + "/deploy/modules", device_set,
      pool_socket(), dir().substr(dir().rfind('/') + 1), state_dir(), agent_timeout_ms, image_cache_dir());
}

Result<E2eEnv> E2eEnv::Create(bool boot_nic) {
  const std::string kernel = BuildDir() + "/deploy/vmlinux";
  const std::string initrd = BuildDir() + "/deploy/capsule-initrd.img";
  for (const auto& f : {kernel, initrd, ShimDir() + "/containerd-shim-capsule-v2", ShimDir() + "/capsule-shimd"}) {
    if (!PathExists(f)) return FailedPrecondition(f + " is missing: build it first (make deps && make)");
  }
  // Short parent: unix socket paths under the VM dirs stay below 108 bytes.
  ASSIGN_OR_RETURN(TempDir tmp, TempDir::Create("cap-e2e", "/tmp"));
  E2eEnv env(std::move(tmp));
  RETURN_IF_ERROR(MkdirAll(env.state_dir(), 0700));
  RETURN_IF_ERROR(WriteFile(env.config_path(), env.ConfigYaml(boot_nic, initrd, "", 30000)));
  return env;
}

std::string E2eEnv::FaultInitrd() { return BuildDir() + "/deploy/capsule-initrd-faults.img"; }

Status E2eEnv::WriteFaultConfig(const std::string& path, const std::string& kernel_params,
                                uint32_t agent_timeout_ms) const {
  if (!PathExists(FaultInitrd())) return FailedPrecondition(FaultInitrd() + " is missing: build capsule-initrd-faults");
  // Written aside and renamed: a shim starting now reads the old or the new.
  RETURN_IF_ERROR(WriteFile(path + ".new", ConfigYaml(true, FaultInitrd(), kernel_params, agent_timeout_ms)));
  if (::rename((path + ".new").c_str(), path.c_str()) != 0) return ErrnoStatus("rename to " + path);
  return Status::Ok();
}

std::vector<std::string> E2eEnv::Leaks(const std::string& containerd_address,
                                       const std::vector<std::string>& extra_dirs, const std::string& ns,
                                       const std::vector<std::string>& shim_groups) const {
  std::vector<std::string> leaks;
  for (const auto& [pid, cmd] : ProcessesNaming({containerd_address, state_dir()}))
    leaks.push_back(fmt::format("process {}: {}", pid, cmd));
  std::vector<std::string> dirs = extra_dirs;
  dirs.push_back(state_dir());
  for (const auto& d : dirs) {
    auto mounts = capsule::MountsUnder(d, /*include_dir=*/true);
    if (mounts.ok()) {
      for (const auto& m : *mounts) leaks.push_back("mount " + m);
    }
  }
  for (const auto& vm : Entries(state_dir() + "/vm")) leaks.push_back("VM dir " + state_dir() + "/vm/" + vm);
  for (const auto& group : shim_groups) {
    auto path = shim::launcher::SocketPathFromAddress(
        shim::launcher::SocketAddress(containerd_address, ns, group, shim::launcher::kDefaultSocketDir));
    struct stat st{};
    if (path.ok() && ::lstat(path->c_str(), &st) == 0) leaks.push_back("socket " + *path + " of " + group);
  }
  return leaks;
}

void E2eEnv::Reap(const std::string& containerd_address, const std::vector<std::string>& extra_dirs) const {
  for (const auto& [pid, cmd] : ProcessesNaming({containerd_address, state_dir()})) ::kill(pid, SIGKILL);
  for (const auto& d : extra_dirs) (void)capsule::UnmountTree(d);
  (void)capsule::UnmountTree(state_dir());
}

}  // namespace capsule::testing
