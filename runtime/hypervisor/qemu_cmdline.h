// The QEMU command line for a VmSpec: a pure function of config, spec and
// the host decisions (accelerator, sandbox support), so unit tests assert the
// exact arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

// Ids of the hot-plug root ports ("rp0".."rpN-1").
std::string HotplugPortId(uint32_t index);

// QEMU's seccomp policy: everything QEMU allows denying, denied. spawn=deny
// is why QEMU's own -daemonize cannot be used (see qemu_hypervisor.cc).
inline constexpr const char* kQemuSandboxPolicy = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";

struct QemuCommandInput {
  const config::HypervisorConfig* hypervisor = nullptr;
  VmSpec spec;  // validated; console_log resolved
  Accelerator accelerator = Accelerator::kTcg;
  bool sandbox = false;  // config.seccomp_sandbox and supported by the binary
  int qmp_listen_fd = -1;  // a bound, listening unix socket QEMU inherits
  // Descriptors QEMU inherits for boot devices, by device id: a tap, a
  // connected vhost-user socket, a kernel vsock's vhost fd. A device without
  // one is opened by QEMU (by name or path).
  std::map<std::string, int> device_fds;
  // The console log we opened (O_APPEND), handed over as fdset 1; -1: QEMU
  // opens the path.
  int console_fd = -1;
  // spec.memory_file opened by us; -1: QEMU opens the path.
  int memory_file_fd = -1;
  // A sealed memfd holding spec.agent_token, which QEMU reads as fw_cfg
  // file guest_abi::kAgentTokenFwCfgName through /proc/self/fd; -1: none.
  int agent_token_fd = -1;
  // spec.kernel, spec.initrd and the config's firmware opened by us, read
  // by QEMU through /proc/self/fd (a jailed QEMU sees none of their paths);
  // -1: QEMU opens the path.
  int kernel_fd = -1;
  int initrd_fd = -1;
  int firmware_fd = -1;
};

// The fdset the console log is handed over in.
inline constexpr int kConsoleFdset = 1;

// spec.kernel_cmdline, then config's kernel_params, then the spec's extras.
std::string ComposeKernelCmdline(const VmSpec& spec, const config::HypervisorConfig& hv);

std::vector<std::string> BuildQemuCommandLine(const QemuCommandInput& in);

}  // namespace capsule::hypervisor
