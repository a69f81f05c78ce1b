// VsockBackend: how the host reaches the agent inside a VM over vsock.
// One per host, chosen by config (vsock.backend: auto | vhost | vhost-user):
//  - vhost:      the kernel's /dev/vhost-vsock; QEMU gets vhost-vsock-pci
//                with a CID we reserved; the host dials AF_VSOCK (cid, port).
//  - vhost-user: Capsule's capsule-vsockd per VM; QEMU gets
//                vhost-user-vsock-pci (guest RAM must be shared); the host
//                dials the hybrid unix socket ("CONNECT <port>\n").
//  - serial:     capsule-vsockd behind a virtio-serial port that carries
//                vsock packets (stream_link.h); QEMU emulates the port, so
//                guest RAM may be private and the device migrates. The
//                guest's agent runs the other end. Never chosen by auto.
// Per VM the backend hands out a VmVsock: the QEMU device to add and a
// Dial(port) that returns a connected stream to that guest port. A VM's
// vsock can be adopted by another process (warm pool) from <vm_dir>/vsock.json.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"

namespace capsule::vsock {

struct VmVsockSpec {
  std::string vm_dir;                // exists; the backend's sockets and vsock.json live here
  uint64_t guest_cid = 0;            // 0: the backend chooses (vhost-user: 3; vhost: first free from 3)
  std::string device_id = "vsock0";  // QEMU id of the device; its chardev is "<id>-chr"
};

// What QEMU needs for the VM's vsock device.
struct QemuVsockDevice {
  std::string driver;  // "vhost-user-vsock-pci", "vhost-vsock-pci" or "virtserialport"
  // serial: the virtio-serial-pci controller the port sits on, added before
  // it with id "<id>-bus" (the port then names bus=<id>-bus.0).
  std::string bus_driver;
  std::vector<std::pair<std::string, std::string>> properties;  // in -device order, id first
  std::string chardev_id;    // vhost-user: the socket chardev QEMU connects with
  std::string chardev_path;
  std::vector<int> inherit_fds;      // QEMU must inherit these at the same numbers (vhostfd)
  bool needs_shared_memory = false;  // guest RAM as memory-backend-memfd,share=on + -numa node,memdev=

  // "-chardev socket,id=..,path=.." (if any) and "-device driver,k=v,..",
  // with QEMU's ",," escaping of commas in values.
  std::vector<std::string> Args() const;
};

class VmVsock {
 public:
  virtual ~VmVsock() = default;

  virtual config::VsockBackendKind kind() const = 0;
  virtual uint64_t guest_cid() const = 0;
  virtual const QemuVsockDevice& qemu_device() const = 0;

  // A connected, blocking byte stream to guest port `port`. UNAVAILABLE when
  // nothing accepts there (agent not up yet, driver not loaded): a caller
  // waiting for a booting guest retries. `timeout` bounds one attempt.
  virtual Result<UniqueFd> Dial(uint32_t port, std::chrono::milliseconds timeout) const = 0;
  // Where a host program listens to accept the guest's connections to host
  // port `port`: a unix socket path (vhost-user), or "" for the kernel
  // backend (bind AF_VSOCK VMADDR_CID_ANY:port instead).
  virtual std::string HostListenPath(uint32_t port) const = 0;

  // Call once QEMU is running: releases what was kept only for QEMU to inherit.
  virtual void OnQemuStarted() = 0;
  // Stops the host end and removes its files. vhost-user: SIGTERM to
  // capsule-vsockd, SIGKILL after `grace`. Idempotent.
  virtual Status Shutdown(std::chrono::milliseconds grace) = 0;
  // Leaves everything running for another process to adopt; destroying
  // this object then stops nothing.
  virtual void Detach() = 0;
};
using VmVsockPtr = std::unique_ptr<VmVsock>;

class VsockBackend {
 public:
  virtual ~VsockBackend() = default;
  virtual config::VsockBackendKind kind() const = 0;
  // Sets up the host end for a VM about to boot (before QEMU starts).
  virtual Result<VmVsockPtr> Prepare(const VmVsockSpec& spec) = 0;
  // Takes over the host end another process prepared, from <vm_dir>/vsock.json.
  virtual Result<VmVsockPtr> Adopt(const std::string& vm_dir) = 0;
};
using VsockBackendPtr = std::unique_ptr<VsockBackend>;

struct VsockBackendOptions {
  std::string vhost_vsock_device = "/dev/vhost-vsock";
  // "" = $CAPSULE_VSOCKD, else next to this executable, else the build
  // tree ($CAPSULE_BUILD_DIR), else the install prefix's bin/.
  std::string vsockd_path;
  std::chrono::milliseconds start_timeout{5000};  // capsule-vsockd until READY
  log::Level vsockd_log_level = log::Level::kInfo;
};

// Files a backend keeps in the VM directory.
inline constexpr const char* kStateFile = "vsock.json";
inline constexpr const char* kVhostUserSocketName = "vhost-vsock.sock";
inline constexpr const char* kSerialSocketName = "vsock-serial.sock";
inline constexpr const char* kHybridSocketName = "vsock.sock";
inline constexpr const char* kVsockdPidName = "vsockd.pid";
inline constexpr const char* kVsockdLogName = "vsockd.log";
// The agent's port (ARCHITECTURE.md).
inline constexpr uint32_t kAgentPort = 1024;

// `auto` becomes kVhost when the kernel device can be opened, else kVhostUser.
config::VsockBackendKind ResolveVsockBackendKind(config::VsockBackendKind wanted, bool kernel_device_usable);
// Probes the host (opens options.vhost_vsock_device) and builds the backend.
// Forcing `vhost` without a usable device is FAILED_PRECONDITION.
Result<VsockBackendPtr> MakeVsockBackend(config::VsockBackendKind wanted, const VsockBackendOptions& options = {});
// Adopts whichever backend <vm_dir>/vsock.json names.
Result<VmVsockPtr> AdoptVmVsock(const std::string& vm_dir, const VsockBackendOptions& options = {});

}  // namespace capsule::vsock
