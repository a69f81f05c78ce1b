// <vm_dir>/vsock.json: what another process needs to adopt a VM's vsock
// host end (warm pool hand-over): which backend, the guest CID, and for
// vhost-user the daemon's pid and sockets.
//   {"backend":"vhost-user","guest_cid":3,"device_id":"vsock0",
//    "vsockd_pid":1234,"vhost_user_socket":"...","hybrid_socket":"..."}
// (serial: "serial_socket" in place of "vhost_user_socket").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "runtime/common/status.h"
#include "runtime/config/config.h"

namespace capsule::vsock {

struct VsockState {
  config::VsockBackendKind backend = config::VsockBackendKind::kVhostUser;
  uint64_t guest_cid = 0;
  std::string device_id;
  pid_t vsockd_pid = 0;           // capsule-vsockd's (vhost-user, serial)
  std::string vhost_user_socket;  // vhost-user only
  std::string serial_socket;      // serial only
  std::string hybrid_socket;      // vhost-user, serial
};

Status WriteVsockState(const std::string& vm_dir, const VsockState& s);
// Errors name the file and the bad or missing key.
Result<VsockState> ReadVsockState(const std::string& vm_dir);

}  // namespace capsule::vsock
