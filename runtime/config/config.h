// Capsule's configuration: /etc/capsule/config.yaml (or containerd's
// ConfigPath option) loaded into typed structs. Every field has a default,
// so an empty file is valid; deploy/config.yaml documents each key.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"

namespace capsule::config {

inline constexpr const char* kDefaultPath = "/etc/capsule/config.yaml";

enum class Accelerator { kAuto, kKvm, kTcg };
// kSerial: capsule-vsockd behind a virtio-serial port (QEMU-internal, so it
// needs no shared guest RAM and migrates: the dense device set).
enum class VsockBackendKind { kAuto, kVhost, kVhostUser, kSerial };
// What a pod VM is made of. kVirtioFs: guest RAM shared with vhost-user
// back ends (virtiofsd carries the rootfs and volumes), so each pool clone
// holds a full copy of its template's RAM. kDense: no vhost-user device, so
// a clone maps its template's RAM private (copy-on-write) and owns only the
// pages it writes; the vsock is the serial one (or the kernel's) and
// nothing is shared by virtio-fs.
enum class DeviceSet { kVirtioFs, kDense };

struct HypervisorConfig {
  std::string path = "/usr/bin/qemu-system-x86_64";
  Accelerator accelerator = Accelerator::kAuto;
  // Appended to the guest kernel command line.
  std::string kernel_params;
  // Bounds QEMU TCG's translation cache (MiB); 0 keeps QEMU's default.
  uint32_t tcg_tb_size_mib = 64;
  // QEMU's -sandbox on (seccomp) where the binary supports it.
  bool seccomp_sandbox = true;
  // Firmware for direct kernel boot (-bios); "" = QEMU's default (SeaBIOS).
  std::string firmware;
  // Each QEMU runs as a uid (and gid) of its own from [vmm_uid_base,
  // vmm_uid_base + vmm_uid_count), numbers no account uses, with no
  // capabilities, in mount and network namespaces of its own. 0: QEMU runs
  // as the launching user (root), as before.
  uint32_t vmm_uid_base = 0x7fff0000;
  uint32_t vmm_uid_count = 65536;
};

struct GuestConfig {
  // The uncompressed ELF (PVH boot); a bzImage (vmlinuz) boots too, slower.
  std::string kernel = "/usr/share/capsule/vmlinux";
  std::string initrd = "/usr/share/capsule/capsule-initrd.img";
  uint32_t default_vcpus = 1;
  uint32_t default_memory_mib = 256;
  // Upper bounds when a pod's annotations ask for more.
  uint32_t max_vcpus = 8;
  uint32_t max_memory_mib = 16384;
  // One virtio-net NIC plugged at boot on a tap in the VMM's own netns; the
  // pod's first interface takes it over at sandbox start (the tap moves into
  // the pod's netns, the agent gives the NIC the veth's MAC), which costs a
  // few netlink calls instead of a PCI hot-plug and driver probe in the
  // guest. false: every pod NIC is hot-plugged.
  bool boot_nic = true;
  // A host directory holding the guest kernel's module tree
  // (<release>/modules.dep, modules.alias, kernel/...), exposed read-only
  // in every VM's share so the guest loads netfilter, bridge, veth, tun...
  // on demand (the agent is the kernel's modprobe helper). "", or a path
  // that is not a directory (logged): only the image's own modules.
  std::string modules = "/usr/share/capsule/modules";
  // Module names or globs the guest kernel may load on demand beyond the
  // built-in allowlist (netfilter, bridges, tunnels, IPVS, tc, overlay;
  // agent/modules/module_policy.h). Rare protocol families (AF_ALG, CAN,
  // RxRPC...) stay out unless named here.
  std::vector<std::string> modules_allow;
  DeviceSet device_set = DeviceSet::kVirtioFs;
};

struct VsockConfig {
  VsockBackendKind backend = VsockBackendKind::kAuto;
};

struct VirtiofsConfig {
  std::string daemon = "/usr/lib/qemu/virtiofsd";
  // virtiofsd -o cache=: none | auto | always
  std::string cache = "auto";
  // virtiofsd --thread-pool-size: 0 serves each request on its queue's
  // thread. A pool hands every request to a worker thread first, a thread
  // wake-up per FUSE round trip; a container's create makes about forty of
  // them (mount points, PATH search), and the default pool of 64 made its
  // set-up in the guest ~12 ms slower here. A pool pays only for a guest
  // doing I/O in parallel on slow host storage.
  uint32_t thread_pool_size = 0;
};

struct PoolConfig {
  // Ready VMs capsule-poold keeps per shape; 0 keeps none. The shim claims
  // from the daemon at `socket` whenever it answers, else cold-boots.
  uint32_t size = 2;
  std::string socket = "/run/capsule/pool.sock";
  // Cold boots the daemon runs at once to refill (each takes a core under TCG).
  uint32_t max_parallel_boots = 1;
  // A claim that takes longer than this is abandoned for a cold boot.
  uint32_t claim_timeout_ms = 2000;
  // A claim that finds no ready VM while a clone of the shape's template is
  // being restored waits this long for it (a restore ends well before a
  // cold boot would); 0 never waits. Below claim_timeout_ms.
  uint32_t claim_wait_ms = 1000;
  // A refill for a claimed VM starts this long after the claim, while the
  // pod it went to starts (a clone resuming beside a starting pod stalls
  // its guest ~100 ms under TCG); 0 refills at once. A claim that finds no
  // ready VM starts the held-back refills at once and waits for a clone
  // (claim_wait_ms).
  uint32_t refill_holdback_ms = 1000;
  // The cgroup (cgroupfs path, every hierarchy) idle pool VMs live in;
  // refills run in its sibling "<cgroup>-refill" at a low CPU weight
  // (kRefillCpuWeight) until ready; a claimed VM moves to its pod's. ""
  // leaves them in the daemon's.
  std::string cgroup = "/capsule-pool";
  // How the pool makes ready VMs: "template" restores clones of a template
  // VM booted once per shape (vm_template.h; any failure there falls back
  // to a boot), "boot" cold-boots each one.
  std::string refill = "template";
  // A shape other than the default one (pods that ask for other sizes; at
  // most 8 shapes) is forgotten with its idle VMs and its template after
  // this long without a claim, so tenant-chosen sizes do not keep VMs for
  // ever.
  uint32_t shape_expiry_s = 600;
  // Idle VMs (ready or being made) of all shapes together; the default
  // shape's come first.
  uint32_t max_idle = 8;
};

struct RuntimeConfig {
  std::string state_dir = "/run/capsule";
  log::Level log_level = log::Level::kInfo;
  // Deadline for a booting guest's agent to answer Check.
  uint32_t boot_timeout_ms = 60000;
  // Deadline of every agent call that does not wait on the guest's
  // processes (all but the long polls: WaitProcess, stdio reads and writes,
  // OOM events). An agent that misses it is taken as hung: the call fails
  // naming the RPC and the pod, and the pod's VM is stopped.
  uint32_t agent_timeout_ms = 30000;
  // The dense device set's erofs images of container rootfs, one per set of
  // image layers, shared by every pod of the node that runs that image
  // (on disk: a tmpfs would hold them in RAM).
  std::string image_cache_dir = "/var/lib/capsule/images";
  // What those images may take on disk: after a build, the ones used least
  // recently go until the rest fit (none in use). 0: unbounded.
  uint32_t image_cache_max_mib = 10240;
};

struct Config {
  HypervisorConfig hypervisor;
  GuestConfig guest;
  VsockConfig vsock;
  VirtiofsConfig virtiofs;
  PoolConfig pool;
  RuntimeConfig runtime;
  // The file it came from ("" for built-in defaults).
  std::string source;
};

// Loads and validates `path`. Errors name the file, the line and the key:
//   "/etc/capsule/config.yaml:4:3: unknown key 'guest.kernell'"
Result<Config> LoadFile(const std::string& path);
// Same rules for YAML text; `source_name` is used in error messages.
Result<Config> LoadString(const std::string& yaml, const std::string& source_name);

// The effective configuration as YAML (for `capsule-runtime env`).
std::string ToYaml(const Config& config);
// The same as JSON (`capsule-runtime env --json`).
nlohmann::json ToJson(const Config& config);

std::string_view AcceleratorName(Accelerator a);
std::string_view VsockBackendName(VsockBackendKind v);
std::string_view DeviceSetName(DeviceSet d);

}  // namespace capsule::config
