// Backend selection: `auto` probes the kernel device by opening it (its mere
// presence is not enough: a node without the module, or without permission,
// does not work), and forcing `vhost` where it cannot work is an error that
// says what to configure instead.
#include "runtime/vsock/vsock_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "runtime/vsock/kernel_vhost_vsock.h"
#include "runtime/vsock/vsockd_vsock.h"
#include "runtime/vsock/vsock_state.h"

namespace capsule::vsock {
namespace {

std::string QemuEscape(const std::string& v) {
  std::string out;
  for (char c : v) {
    out += c;
    if (c == ',') out += ',';  // QEMU option syntax: ",," is a literal comma
  }
  return out;
}

// Opens the device read-write as QEMU would; the errno explains a failure.
bool KernelDeviceUsable(const std::string& path, int* err) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  ::close(fd);
  return true;
}

}  // namespace

std::vector<std::string> QemuVsockDevice::Args() const {
  std::vector<std::string> args;
  if (!chardev_id.empty()) {
    args.push_back("-chardev");
    args.push_back("socket,id=" + QemuEscape(chardev_id) + ",path=" + QemuEscape(chardev_path));
  }
  if (!bus_driver.empty()) {
    args.push_back("-device");
    args.push_back(bus_driver + ",id=" + QemuEscape(properties.front().second) + "-bus");
  }
  std::string dev = driver;
  for (const auto& [k, v] : properties) dev += "," + k + "=" + QemuEscape(v);
  args.push_back("-device");
  args.push_back(dev);
  return args;
}

config::VsockBackendKind ResolveVsockBackendKind(config::VsockBackendKind wanted, bool kernel_device_usable) {
  if (wanted != config::VsockBackendKind::kAuto) return wanted;
  return kernel_device_usable ? config::VsockBackendKind::kVhost : config::VsockBackendKind::kVhostUser;
}

Result<VsockBackendPtr> MakeVsockBackend(config::VsockBackendKind wanted, const VsockBackendOptions& options) {
  int err = 0;
  bool usable = KernelDeviceUsable(options.vhost_vsock_device, &err);
  config::VsockBackendKind kind = ResolveVsockBackendKind(wanted, usable);
  if (kind == config::VsockBackendKind::kVhost) {
    if (!usable)
      return FailedPrecondition("vsock.backend is 'vhost' but " + options.vhost_vsock_device + " cannot be opened (" +
                                std::strerror(err) +
                                "); load the vhost_vsock module, or set vsock.backend to 'vhost-user' or 'auto'");
    return VsockBackendPtr(new KernelVhostVsock(options));
  }
  auto backend = std::make_unique<VsockdVsock>(options, kind);
  // Fail at start-up, not at the first VM, when the daemon is missing.
  RETURN_IF_ERROR_CTX(backend->VsockdPath().status(),
                      "vsock backend '" + std::string(config::VsockBackendName(kind)) + "'");
  return VsockBackendPtr(std::move(backend));
}

Result<VmVsockPtr> AdoptVmVsock(const std::string& vm_dir, const VsockBackendOptions& options) {
  ASSIGN_OR_RETURN(VsockState s, ReadVsockState(vm_dir));
  if (s.backend == config::VsockBackendKind::kVhost) return KernelVhostVsock(options).Adopt(vm_dir);
  return VsockdVsock(options, s.backend).Adopt(vm_dir);
}

}  // namespace capsule::vsock
