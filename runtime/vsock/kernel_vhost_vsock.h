// KernelVhostVsock: the VsockBackend for hosts with /dev/vhost-vsock. The
// kernel carries the data; we only reserve a guest CID and dial AF_VSOCK.
// The CID is reserved atomically the way Kata does it: open the device and
// VHOST_VSOCK_SET_GUEST_CID until one is free (EADDRINUSE means taken),
// then hand that very fd to QEMU (vhost-vsock-pci,vhostfd=N), so no other
// VM can take the CID between our probe and QEMU's start.
#pragma once

#include <string>

#include "runtime/vsock/vsock_backend.h"

namespace capsule::vsock {

// CIDs probed before giving up (each try is one ioctl).
inline constexpr uint32_t kMaxCidProbes = 4096;

class KernelVhostVsock : public VsockBackend {
 public:
  explicit KernelVhostVsock(VsockBackendOptions options) : options_(std::move(options)) {}

  config::VsockBackendKind kind() const override { return config::VsockBackendKind::kVhost; }
  Result<VmVsockPtr> Prepare(const VmVsockSpec& spec) override;
  Result<VmVsockPtr> Adopt(const std::string& vm_dir) override;

 private:
  VsockBackendOptions options_;
};

// A stream to (cid, port) over AF_VSOCK within `timeout`.
Result<UniqueFd> DialVsock(uint64_t cid, uint32_t port, std::chrono::milliseconds timeout);

}  // namespace capsule::vsock
