// The OCI runtime spec (config.json) as typed structs: what the shim reads
// from a bundle and what the agent's engine executes. Parsed by
// runtime/oci/spec_parser.h; fields follow opencontainers/runtime-spec
// (config.md, config-linux.md), JSON names in the comments where they differ.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace capsule::oci {

struct Root {
  std::string path;
  bool readonly = false;
};

struct Mount {
  std::string destination;
  std::string type;
  std::string source;
  std::vector<std::string> options;
};

struct User {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::optional<uint32_t> umask;
  std::vector<uint32_t> additional_gids;  // additionalGids
};

// Capability numbers (linux/capability.h), resolved from "CAP_*" names.
struct Capabilities {
  std::vector<int> bounding;
  std::vector<int> effective;
  std::vector<int> inheritable;
  std::vector<int> permitted;
  std::vector<int> ambient;
};

struct Rlimit {
  std::string type;  // "RLIMIT_NOFILE"
  int resource = 0;  // RLIMIT_NOFILE, from sys/resource.h
  uint64_t hard = 0;
  uint64_t soft = 0;
};

struct ConsoleSize {
  uint32_t height = 0;
  uint32_t width = 0;
};

struct Process {
  bool terminal = false;
  std::optional<ConsoleSize> console_size;  // consoleSize
  User user;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string cwd = "/";
  std::optional<Capabilities> capabilities;
  std::vector<Rlimit> rlimits;
  bool no_new_privileges = false;  // noNewPrivileges
  std::optional<int> oom_score_adj;  // oomScoreAdj
  // Parsed so a spec carrying them is accepted; the guest has no LSM policy.
  std::string apparmor_profile;  // apparmorProfile
  std::string selinux_label;     // selinuxLabel
};

enum class NamespaceType { kPid, kNetwork, kMount, kIpc, kUts, kUser, kCgroup, kTime };

// The spec's name for a namespace type ("pid", "network", ...).
const char* NamespaceTypeName(NamespaceType type);

struct Namespace {
  NamespaceType type = NamespaceType::kPid;
  std::string path;  // empty: create a new one
};

struct LinuxCpu {
  std::optional<uint64_t> shares;
  std::optional<int64_t> quota;  // microseconds per period; -1 or absent: no limit
  std::optional<uint64_t> period;
  std::optional<int64_t> realtime_runtime;  // realtimeRuntime
  std::optional<uint64_t> realtime_period;  // realtimePeriod
  std::optional<uint64_t> burst;
  std::optional<int64_t> idle;
  std::string cpus;
  std::string mems;
};

struct LinuxMemory {
  std::optional<int64_t> limit;        // bytes; -1: unlimited
  std::optional<int64_t> reservation;  // bytes; memory.low on cgroup v2
  std::optional<int64_t> swap;         // memory+swap bytes; -1: unlimited
  std::optional<int64_t> kernel;
  std::optional<int64_t> kernel_tcp;  // kernelTCP
  std::optional<uint64_t> swappiness;
  std::optional<bool> disable_oom_killer;  // disableOOMKiller
  std::optional<bool> use_hierarchy;       // useHierarchy
  std::optional<bool> check_before_update;  // checkBeforeUpdate
};

struct LinuxPids {
  int64_t limit = 0;  // <= 0: unlimited
};

struct LinuxWeightDevice {
  int64_t major = 0;
  int64_t minor = 0;
  std::optional<uint16_t> weight;
  std::optional<uint16_t> leaf_weight;  // leafWeight
};

struct LinuxThrottleDevice {
  int64_t major = 0;
  int64_t minor = 0;
  uint64_t rate = 0;
};

struct LinuxBlockIO {
  std::optional<uint16_t> weight;
  std::optional<uint16_t> leaf_weight;  // leafWeight
  std::vector<LinuxWeightDevice> weight_device;                 // weightDevice
  std::vector<LinuxThrottleDevice> throttle_read_bps_device;    // throttleReadBpsDevice
  std::vector<LinuxThrottleDevice> throttle_write_bps_device;   // throttleWriteBpsDevice
  std::vector<LinuxThrottleDevice> throttle_read_iops_device;   // throttleReadIOPSDevice
  std::vector<LinuxThrottleDevice> throttle_write_iops_device;  // throttleWriteIOPSDevice
};

// A device cgroup rule (linux.resources.devices[]).
struct LinuxDeviceCgroup {
  bool allow = false;
  std::string type;  // "a", "c", "b"
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::string access;  // "rwm"
};

struct LinuxHugepageLimit {
  std::string page_size;  // pageSize, "2MB"
  uint64_t limit = 0;
};

struct LinuxResources {
  std::vector<LinuxDeviceCgroup> devices;
  std::optional<LinuxMemory> memory;
  std::optional<LinuxCpu> cpu;
  std::optional<LinuxPids> pids;
  std::optional<LinuxBlockIO> block_io;  // blockIO
  std::vector<LinuxHugepageLimit> hugepage_limits;  // hugepageLimits
  std::map<std::string, std::string> unified;  // cgroup v2 file -> value
};

// A device node to create in the container (linux.devices[]).
struct LinuxDevice {
  std::string path;
  std::string type;  // "c", "b", "u", "p"
  int64_t major = 0;
  int64_t minor = 0;
  std::optional<uint32_t> file_mode;  // fileMode, permission bits
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

enum class SeccompAction {
  kKill,         // SCMP_ACT_KILL (kill the thread)
  kKillProcess,  // SCMP_ACT_KILL_PROCESS
  kKillThread,   // SCMP_ACT_KILL_THREAD
  kTrap,         // SCMP_ACT_TRAP
  kErrno,        // SCMP_ACT_ERRNO
  kTrace,        // SCMP_ACT_TRACE
  kAllow,        // SCMP_ACT_ALLOW
  kLog,          // SCMP_ACT_LOG
  kNotify,       // SCMP_ACT_NOTIFY
};

enum class SeccompOp { kNotEqual, kLessThan, kLessEqual, kEqualTo, kGreaterEqual, kGreaterThan, kMaskedEqual };

struct SeccompArg {
  uint32_t index = 0;
  uint64_t value = 0;
  uint64_t value_two = 0;  // valueTwo
  SeccompOp op = SeccompOp::kEqualTo;
};

struct SeccompSyscall {
  std::vector<std::string> names;
  SeccompAction action = SeccompAction::kAllow;
  std::optional<uint32_t> errno_ret;  // errnoRet
  std::vector<SeccompArg> args;
};

struct Seccomp {
  SeccompAction default_action = SeccompAction::kAllow;  // defaultAction
  std::optional<uint32_t> default_errno_ret;              // defaultErrnoRet
  std::vector<std::string> architectures;                  // "SCMP_ARCH_X86_64"
  std::vector<std::string> flags;                          // "SECCOMP_FILTER_FLAG_LOG"
  std::string listener_path;                               // listenerPath
  std::vector<SeccompSyscall> syscalls;
};

struct Linux {
  std::vector<Namespace> namespaces;
  std::optional<LinuxResources> resources;
  std::string cgroups_path;  // cgroupsPath
  std::vector<LinuxDevice> devices;
  std::map<std::string, std::string> sysctl;
  std::vector<std::string> masked_paths;    // maskedPaths
  std::vector<std::string> readonly_paths;  // readonlyPaths
  std::string rootfs_propagation;           // rootfsPropagation
  std::optional<Seccomp> seccomp;
  std::string mount_label;  // mountLabel (SELinux; ignored in the guest)
  bool has_uid_mappings = false;  // uidMappings/gidMappings present (user namespaces)
};

struct Hook {
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int> timeout;  // seconds
};

struct Hooks {
  std::vector<Hook> prestart;
  std::vector<Hook> create_runtime;    // createRuntime
  std::vector<Hook> create_container;  // createContainer
  std::vector<Hook> start_container;   // startContainer
  std::vector<Hook> poststart;
  std::vector<Hook> poststop;
  bool empty() const {
    return prestart.empty() && create_runtime.empty() && create_container.empty() &&
           start_container.empty() && poststart.empty() && poststop.empty();
  }
};

struct Spec {
  std::string oci_version;  // ociVersion
  Root root;
  Process process;  // required for a Linux container
  std::string hostname;
  std::string domainname;
  std::vector<Mount> mounts;
  Hooks hooks;
  std::map<std::string, std::string> annotations;
  Linux linux;  // absent in JSON: all defaults
};

}  // namespace capsule::oci
