// QEMU, QMP and initrd plumbing for the vsock integration tests.
#include "tests/runtime/vsock/qemu_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/unix_stream.h"
#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock::testing {
namespace {

constexpr const char* kQemu = "/usr/bin/qemu-system-x86_64";
constexpr const char* kBusybox = "/bin/busybox";
// Load order from `modinfo -F depends` on Debian 12's 6.1 kernel.
constexpr const char* kModules[] = {"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
                                    "virtio_pci", "vsock", "vmw_vsock_virtio_transport_common",
                                    "vmw_vsock_virtio_transport"};

Result<std::string> FindFile(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return NotFound(dir);
  std::vector<std::string> subdirs;
  std::string found;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (e->d_type == DT_DIR) subdirs.push_back(dir + "/" + n);
    if (n == name) found = dir + "/" + n;
  }
  ::closedir(d);
  if (!found.empty()) return found;
  for (const std::string& s : subdirs) {
    auto r = FindFile(s, name);
    if (r.ok()) return r;
  }
  return NotFound(name + " under " + dir);
}

Status RunShell(const std::string& script) {
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", script};
  ASSIGN_OR_RETURN(ChildProcess c, ChildProcess::Spawn(so));
  ASSIGN_OR_RETURN(int st, c.Wait(std::chrono::seconds(60)));
  if (ExitCode(st) != 0) return Internal("shell step failed: " + script);
  return Status::Ok();
}

}  // namespace

Result<Qmp> Qmp::Connect(const std::string& path, ChildProcess& qemu, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Qmp q;
  for (;;) {
    auto fd = ConnectUnix(path);
    if (fd.ok()) {
      q.fd_ = std::move(*fd);
      break;
    }
    if (qemu.TryReap()) return Unavailable("QEMU exited before its QMP socket appeared");
    if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded("no QMP socket at " + path);
    // QEMU creates the socket during start-up; there is no event to wait on.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  RETURN_IF_ERROR(q.ReadMessage(timeout).status());  // greeting
  RETURN_IF_ERROR(q.Execute("qmp_capabilities").status());
  return q;
}

Result<nlohmann::json> Qmp::ReadMessage(std::chrono::milliseconds timeout) {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) return Internal("QMP: bad JSON: " + line);
      return j;
    }
    RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, timeout, "QMP reply"));
    char tmp[4096];
    ssize_t n = ::recv(fd_.get(), tmp, sizeof tmp, 0);
    if (n <= 0) return Unavailable("QMP socket closed");
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> Qmp::Execute(const std::string& command, const nlohmann::json& args) {
  nlohmann::json req = {{"execute", command}};
  if (!args.is_null()) req["arguments"] = args;
  std::string line = req.dump() + "\n";
  if (::send(fd_.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    return ErrnoStatus("QMP send " + command);
  for (;;) {
    ASSIGN_OR_RETURN(nlohmann::json msg, ReadMessage(std::chrono::seconds(30)));
    if (msg.contains("event")) continue;
    if (msg.contains("error")) return Internal("QMP " + command + ": " + msg["error"].dump());
    if (msg.contains("return")) return msg["return"];
  }
}

std::optional<GuestKernel> FindGuestKernel() {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("CAPSULE_TEST_GUEST_KERNEL_DIR")) roots.emplace_back(env);
  if (const char* src = std::getenv("CAPSULE_SOURCE_DIR")) roots.push_back(std::string(src) + "/.cache/guest-kernel/current");
  for (const std::string& root : roots) {
    DIR* boot = ::opendir((root + "/boot").c_str());
    if (boot == nullptr) continue;
    std::string vmlinuz, release;
    while (dirent* e = ::readdir(boot)) {
      std::string n = e->d_name;
      if (n.rfind("vmlinuz-", 0) == 0) {
        vmlinuz = root + "/boot/" + n;
        release = n.substr(8);
      }
    }
    ::closedir(boot);
    std::string mods = root + "/lib/modules/" + release;
    if (!vmlinuz.empty() && ::access((mods + "/kernel").c_str(), F_OK) == 0) return GuestKernel{vmlinuz, mods};
  }
  return std::nullopt;
}

Result<QemuVmm> StartQemu(const TempDir& dir, const VmVsock& vsock, const std::vector<std::string>& extra) {
  std::string log_path = dir.Join("qemu.log");
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  SpawnOptions so;
  so.argv = {kQemu, "-M", "q35", "-accel", "tcg", "-nodefaults", "-nographic", "-m", "256M",
             "-object", "memory-backend-memfd,id=mem,size=256M,share=on", "-numa", "node,memdev=mem",
             "-qmp", "unix:" + dir.Join("qmp.sock") + ",server=on,wait=off"};
  for (const std::string& a : vsock.qemu_device().Args()) so.argv.push_back(a);
  so.argv.insert(so.argv.end(), extra.begin(), extra.end());
  so.stdout_fd = so.stderr_fd = log.get();
  so.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess p, ChildProcess::Spawn(so));
  return QemuVmm{std::move(p), log_path};
}

Result<std::string> BuildEchoInitrd(const TempDir& dir, const GuestKernel& kernel, const std::string& guest_binary) {
  std::string root = dir.Join("initrd-root");
  RETURN_IF_ERROR(MkdirAll(root + "/bin"));
  RETURN_IF_ERROR(MkdirAll(root + "/lib/modules"));
  std::string script = "cp " + std::string(kBusybox) + " " + root + "/bin/busybox && cp " + guest_binary + " " + root +
                       "/vsock_echo_guest";
  std::string init = "#!/bin/busybox sh\n"
                     "/bin/busybox mkdir -p /proc /sys /dev\n"
                     "/bin/busybox mount -t proc proc /proc\n"
                     "/bin/busybox mount -t sysfs sys /sys\n"
                     "/bin/busybox mount -t devtmpfs dev /dev\n";
  for (const char* m : kModules) {
    ASSIGN_OR_RETURN(std::string ko, FindFile(kernel.modules_dir + "/kernel", std::string(m) + ".ko"));
    script += " && cp " + ko + " " + root + "/lib/modules/";
    init += std::string("/bin/busybox insmod /lib/modules/") + m + ".ko || echo \"init: insmod " + m + " failed\"\n";
  }
  init += "echo init: vsock modules loaded\nexec /vsock_echo_guest\n";
  RETURN_IF_ERROR(RunShell(script));
  RETURN_IF_ERROR(WriteFile(root + "/init", init));
  RETURN_IF_ERROR(RunShell("chmod 755 " + root + "/init && cd " + root +
                           " && find . | cpio -o -H newc --quiet > " + dir.Join("initrd.cpio")));
  return dir.Join("initrd.cpio");
}

}  // namespace capsule::vsock::testing
