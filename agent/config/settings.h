// What the agent takes from the kernel command line when it runs as PID 1.
// The host sets these through the guest kernel command line; every key is
// optional and a bad value never stops the boot (it is logged and ignored).
//
//   capsule.log=trace|debug|info|warn|error   log level on the console (info)
//   capsule.hostname=NAME                     hostname until CreateSandbox (capsule)
//   capsule.modules=a,b                       extra modules of the image to load at boot
//   capsule.modules_allow=a,b*                more modules the kernel may load on demand
//                                             (agent/modules/module_policy.h)
//   capsule.debug_shell=0|1                   spawn /bin/sh on the console (debug image)
//   capsule.cgroups=0|1                       mount cgroup2 and enable controllers (1)
//   capsule.vsock=serial                      the host's channel is the virtio-serial port
//                                             guest_abi::kVsockSerialPortName, not a vsock
//                                             device (agent/channel/serial_vsock.h)
//   capsule.disks=scsi                        load the SCSI disk drivers at boot (the VM's
//                                             disks come on a virtio-scsi controller)
//   capsule.fault=SPEC                        test builds only (agent/faults): make named
//                                             RPCs hang or answer late; the production
//                                             agent logs that it ignores it
#pragma once

#include <string>
#include <vector>

#include "agent/config/kernel_cmdline.h"
#include "runtime/common/logging.h"

namespace capsule::agent::config {

inline constexpr const char* kDefaultHostname = "capsule";

struct BootSettings {
  log::Level log_level = log::Level::kInfo;
  std::string hostname = kDefaultHostname;
  std::vector<std::string> extra_modules;
  std::vector<std::string> allowed_modules;  // patterns, beyond the built-in allowlist
  bool debug_shell = false;
  bool cgroups = true;
  bool serial_vsock = false;  // capsule.vsock=serial
  bool scsi_disks = false;    // capsule.disks=scsi
  // capsule.fault as given (agent/faults parses it); "" when absent.
  std::string fault;
  // Problems found while parsing (unknown key, bad value), reported once
  // logging is up.
  std::vector<std::string> warnings;
};

// Reads the capsule.* keys; other keys belong to the kernel and are skipped.
BootSettings SettingsFromCmdline(const std::vector<KernelParam>& params);

// RFC 1123 host name of at most 64 bytes (HOST_NAME_MAX), as sethostname
// and DNS accept it.
bool IsValidHostname(std::string_view name);
// A kernel module name: [A-Za-z0-9_-]{1,55} (MODULE_NAME_LEN - 1).
bool IsValidModuleName(std::string_view name);

}  // namespace capsule::agent::config
