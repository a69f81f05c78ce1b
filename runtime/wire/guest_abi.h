// The fixed contract between the host (shim, hypervisor driver, pool) and the
// guest (capsule-agent, initrd): names and numbers both sides must agree on.
// Changing one is a protocol change: bump kAgentApiVersion.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace capsule::guest_abi {

// AF_VSOCK port the agent listens on (VMADDR_CID_ANY) for gRPC.
inline constexpr uint32_t kAgentVsockPort = 1024;

// AF_VSOCK port of the agent's port forwarder (port_forward_wire.h): the
// shim's `kubectl port-forward` listener reaches the guest's loopback
// through it. Same agent token handshake as the gRPC port.
inline constexpr uint32_t kPortForwardVsockPort = 1025;

// The virtio-serial port (virtserialport name=) that carries the guest's
// vsock packets when the VM has no vsock device (vsock.backend serial, the
// dense device set); the agent finds it under /sys/class/virtio-ports/.
// Both ends of that link use kSerialVsockGuestCid: a point-to-point link's
// CID names nothing.
inline constexpr std::string_view kVsockSerialPortName = "capsule.vsock";
// Kernel command line switch telling the agent to serve on that port; the
// port appears a little after its driver loads, so the agent waits for it.
inline constexpr std::string_view kSerialVsockParam = "capsule.vsock=serial";
inline constexpr uint64_t kSerialVsockGuestCid = 3;

// Kernel command line switch of a VM with a virtio-scsi controller for
// disks (the dense device set): the agent loads the SCSI disk drivers at
// boot, so the controller's bus is scanned once, in the template, and a
// hot-plugged disk needs no module load. The guest finds a disk by the
// serial the host gave it, in its VPD page 0x80
// (/sys/block/sdX/device/vpd_pg80: a 4-byte header, then the serial).
inline constexpr std::string_view kScsiDisksParam = "capsule.disks=scsi";
inline constexpr std::array<std::string_view, 2> kScsiDiskModules = {"virtio_scsi", "sd_mod"};

// capsule.agent.v1 API revision reported by Agent.Version.
inline constexpr uint32_t kAgentApiVersion = 1;

// The per-VM virtio-fs share: the host attaches it with this tag and asks,
// through CreateSandbox's storages, to mount it at kSharedFsGuestPath.
inline constexpr std::string_view kSharedFsTag = "capsule-shared";
inline constexpr std::string_view kSharedFsGuestPath = "/run/capsule/shared";
// The pod's /dev/shm inside the guest: a tmpfs every container of the pod
// binds (CRI shares one /dev/shm per pod, which a host tmpfs cannot do
// across the VM boundary), of Docker's and CRI's default size. The same
// for every pod, so a pooled VM mounts it before the claim.
inline constexpr std::string_view kPodShmGuestPath = "/run/capsule/pod-shm";
inline constexpr std::string_view kPodShmSize = "size=65536k";
// Host randomness a claim (and the pool's rehearsal) gives the guest RNG,
// with a reseed: no two pods share a random state (Kata gives 512 too).
inline constexpr size_t kGuestReseedBytes = 512;
// Under the share's top: the host's guest kernel module tree (config
// guest.modules), read-only; the agent's modprobe helper loads from
// <it>/<release>/ before the image's own /lib/modules/<release>. Not a
// valid container id (leading dot), so no container's dir can take it.
inline constexpr std::string_view kSharedModulesDir = ".capsule-modules";

// Kernel command line every Capsule guest gets; the host appends its own
// options (capsule.* keys understood by the agent are listed in
// agent/config/settings.h) and config's hypervisor.kernel_params.
//   console=ttyS0  agent log on the first serial port
//   quiet          keep kernel chatter off that (slow under TCG) port
//   panic=-1       reboot at once on panic; with QEMU -no-reboot the VM exits
//   rcupdate.rcu_expedited=1
//                  synchronize_rcu() waits for an expedited grace period, not
//                  a few timer ticks: a container's start waits for RCU
//                  (cgroup joins, namespace changes), and in a pod VM of a
//                  few vCPUs an expedited grace period costs next to nothing.
//                  Measured under TCG (pod_start_bench): a create's "fork to
//                  pid" 28-33 -> 19-23 ms p50; a clone's restore to its
//                  agent's answer 519 -> 349 ms p50 (vm_bench).
inline constexpr std::string_view kBaseKernelCmdline = "console=ttyS0 quiet panic=-1 rcupdate.rcu_expedited=1";

// The operator's additions (config guest.modules_allow) to the allowlist of
// modules the guest kernel may load on demand (agent/modules/
// module_policy.h), as `capsule.modules_allow=PATTERN,PATTERN`.
inline constexpr std::string_view kModulesAllowParam = "capsule.modules_allow";
inline constexpr size_t kModulePatternMax = 55;  // MODULE_NAME_LEN - 1

// A module pattern: a module name or a glob over one ('*', '?'), of
// [A-Za-z0-9_-] otherwise; '-' and '_' are the same in module names.
constexpr bool IsValidModulePattern(std::string_view p) {
  if (p.empty() || p.size() > kModulePatternMax) return false;
  for (char c : p) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '*' || c == '?';
    if (!ok) return false;
  }
  return true;
}

// The VM's agent token: 64 lowercase hex digits (32 random bytes) the host
// makes per VM and hands QEMU as this fw_cfg file, where only guest code
// with port I/O (the agent as PID 1, not a container) reads it. The host
// proves it on every connection before gRPC starts (agent_auth.h), so a
// local user who can reach the guest's vsock CID cannot talk to the agent.
inline constexpr std::string_view kAgentTokenFwCfgName = "opt/io.capsule/agent-token";
inline constexpr size_t kAgentTokenHexLength = 64;

// Line the agent prints on the console once it serves gRPC; hosts and tests
// may wait for it in the serial log (the host should still dial and Check).
inline constexpr std::string_view kAgentReadyMarker = "capsule-agent ready";

}  // namespace capsule::guest_abi
