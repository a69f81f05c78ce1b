// A SandboxVm's state dir, <runtime.state_dir>/vm/<id>/ (mode 0700), shared
// by the parts that make up the VM; each keeps its own files there:
//   vm.json vm.lock qmp.sock qemu.* console.log   hypervisor (vm_paths.h)
//   vhost-vsock.sock vsock.sock[_P] vsockd.* vsock.json   vsock back end
//   shared/ virtiofsd.*                               virtiofs
// Checked before anything starts: the id is a VM id, and every unix socket
// path the parts will create fits sockaddr_un.sun_path.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::vm {

// Longest socket file name any part creates in the dir: the vsock back
// end's guest->host listener "vsock.sock_<port>" with a 10-digit port.
inline constexpr std::string_view kLongestSocketName = "vsock.sock_4294967295";

// The NIC plugged at boot (guest.boot_nic): its QEMU device id, and the
// prefix of the tap QEMU opens by name in its own netns, completed by 6
// random hex digits: unique even where QEMU shares the host's netns (no
// CAP_SYS_ADMIN). "tap_cap" is network::kTapPrefix, so the pod's netns
// snapshot skips the tap once it has moved there.
inline constexpr const char* kBootNicDeviceId = "netboot";
inline constexpr const char* kBootNicTapPrefix = "tap_cap_b";

// INVALID_ARGUMENT naming the id unless it is [A-Za-z0-9][A-Za-z0-9_.-]*
// of at most hypervisor::kMaxVmIdLen characters.
Status ValidateVmId(std::string_view id);

// INVALID_ARGUMENT naming the dir and the limit when a socket in it would
// not fit sun_path.
Status CheckSocketPathsFit(const std::string& state_dir);

// Creates the parent folders and the dir itself with mode 0700.
// ALREADY_EXISTS when the dir is there: a VM of that id runs, or one was
// left behind (`capsule-runtime vm stop <id>` cleans it up).
Status CreateVmDir(const std::string& state_dir);

}  // namespace capsule::vm
