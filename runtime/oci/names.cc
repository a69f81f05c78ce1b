// Name tables for capabilities (linux/capability.h) and rlimits
// (sys/resource.h): the spec carries names, the kernel wants numbers.
#include <sys/resource.h>

#include <array>
#include <string_view>

#include "runtime/oci/spec_parser.h"

namespace capsule::oci {
namespace {

// Index = capability number, from linux/capability.h (Linux 6.1: 0..40).
constexpr std::array<std::string_view, 41> kCapabilities = {
    "CAP_CHOWN",           "CAP_DAC_OVERRIDE",   "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
    "CAP_FSETID",          "CAP_KILL",           "CAP_SETGID",          "CAP_SETUID",
    "CAP_SETPCAP",         "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",       "CAP_NET_RAW",        "CAP_IPC_LOCK",        "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",      "CAP_SYS_RAWIO",      "CAP_SYS_CHROOT",      "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",       "CAP_SYS_ADMIN",      "CAP_SYS_BOOT",        "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",    "CAP_SYS_TIME",       "CAP_SYS_TTY_CONFIG",  "CAP_MKNOD",
    "CAP_LEASE",           "CAP_AUDIT_WRITE",    "CAP_AUDIT_CONTROL",   "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",    "CAP_MAC_ADMIN",      "CAP_SYSLOG",          "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",   "CAP_AUDIT_READ",     "CAP_PERFMON",         "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

struct RlimitName {
  std::string_view name;
  int resource;
};

constexpr std::array<RlimitName, 16> kRlimits = {{
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
}};

}  // namespace

int CapabilityFromName(std::string_view name) {
  for (size_t i = 0; i < kCapabilities.size(); ++i) {
    if (kCapabilities[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string_view CapabilityName(int cap) {
  if (cap < 0 || static_cast<size_t>(cap) >= kCapabilities.size()) return "";
  return kCapabilities[static_cast<size_t>(cap)];
}

int RlimitFromName(std::string_view name) {
  for (const auto& r : kRlimits) {
    if (r.name == name) return r.resource;
  }
  return -1;
}

}  // namespace capsule::oci
