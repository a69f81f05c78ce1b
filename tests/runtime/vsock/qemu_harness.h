// Integration-test helpers for the vsock back end with the real QEMU: start
// qemu-system-x86_64 with a VmVsock's device, talk QMP (a minimal client:
// JSON lines on a unix socket), and build a throwaway initrd that runs the
// vsock echo guest under busybox with the distribution kernel's modules.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/vsock_backend.h"

namespace capsule::vsock::testing {

class Qmp {
 public:
  // Connects (retrying while QEMU starts; failing if `qemu` exits first)
  // and negotiates capabilities.
  static Result<Qmp> Connect(const std::string& path, ChildProcess& qemu, std::chrono::milliseconds timeout);
  // Runs a command; returns its "return" value, or the "error" as a Status.
  Result<nlohmann::json> Execute(const std::string& command, const nlohmann::json& args = nullptr);

 private:
  Result<nlohmann::json> ReadMessage(std::chrono::milliseconds timeout);
  UniqueFd fd_;
  std::string buf_;
};

struct QemuVmm {
  ChildProcess process;
  std::string log;
};

struct GuestKernel {
  std::string vmlinuz;
  std::string modules_dir;  // lib/modules/<release>
};

// $CAPSULE_TEST_GUEST_KERNEL_DIR, else <source>/.cache/guest-kernel/current
// (deploy's fetcher): a dpkg -x of Debian's kernel package.
std::optional<GuestKernel> FindGuestKernel();

// Starts QEMU (TCG, q35, shared memfd RAM) with `vsock`'s device and a QMP
// socket at <dir>/qmp.sock; `extra` is appended (kernel, initrd ...).
Result<QemuVmm> StartQemu(const TempDir& dir, const VmVsock& vsock, const std::vector<std::string>& extra);

// Builds <dir>/initrd.cpio: busybox, the virtio + vsock modules, and
// `guest_binary` run by /init after loading them.
Result<std::string> BuildEchoInitrd(const TempDir& dir, const GuestKernel& kernel, const std::string& guest_binary);

}  // namespace capsule::vsock::testing
