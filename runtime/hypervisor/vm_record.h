// VmRecord: the contents of <state_dir>/vm.json, everything a process that
// did not launch a VM needs to adopt it: the spec it was launched with, the
// VMM's identity (pid + start time + boot id, so a recycled pid is never
// mistaken for it), its sockets and logs, and the devices hot-plugged since.
// Written atomically by the owner after every change.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

struct HotpluggedDevice {
  Device device;
  std::string port;  // QEMU: the pcie-root-port it sits on ("rp0")
  bool operator==(const HotpluggedDevice&) const = default;
};

struct VmRecord {
  static constexpr int kFormatVersion = 1;

  std::string hypervisor;  // "qemu"
  VmSpec spec;             // as launched, console_log resolved
  Accelerator accelerator = Accelerator::kTcg;
  ProcessIdentity vmm;
  int64_t vmm_uid = -1;  // the uid QEMU runs as (vmm_user.h); -1: the launcher's
  std::string vmm_binary;
  std::string vmm_version;  // "7.2.22"
  std::string qmp_socket;
  std::string vmm_log;
  std::vector<HotpluggedDevice> hotplugged;

  bool operator==(const VmRecord& o) const;
};

std::string VmRecordToJson(const VmRecord& record);
// Errors name the source and the field: "/run/capsule/vm/a/vm.json: field
// 'spec.vcpus': expected an unsigned integer".
Result<VmRecord> VmRecordFromJson(std::string_view text, std::string_view source);

}  // namespace capsule::hypervisor
