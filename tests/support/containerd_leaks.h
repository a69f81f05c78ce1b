// What a test's private containerd can leave on the host, found and cleaned
// up: shim processes naming its address, mounts under its dir, pod network
// namespaces CNI made since it started, ports on its CNI bridge and the
// bridge itself. ContainerdHarness::Leaks() reports these; its Stop()
// removes them, so a failed test still leaves a clean host.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::testing {

// Where containerd 1.6's CRI puts pod network namespaces (not configurable).
inline constexpr const char* kCniNetnsDir = "/var/run/netns";

// Whose leftovers to look for.
struct LeakScope {
  std::string address;   // containerd's gRPC socket: shims get it as -address
  pid_t daemon_pid = -1; // containerd itself, not a leak
  std::string dir;       // everything mounted below it is ours
  std::optional<std::string> bridge;      // CNI bridge, when CNI is on
  std::string netns_dir = kCniNetnsDir;   // scanned only with a bridge
  std::vector<std::string> netns_before;  // netns_dir entries at start
  // containerd's metadata (bolt) file. When set, a new cni-* netns counts
  // only if this file names it: CRI records each sandbox's netns path there,
  // and other tests' containerds on this host make cni-* netns too, which
  // must be neither reported nor removed. Empty: every new one counts.
  std::string metadata_db;
};

struct ContainerdLeaks {
  std::vector<std::pair<pid_t, std::string>> processes;  // pid, command line
  std::vector<std::string> mounts;                       // mount points
  std::vector<std::string> netns;                        // full paths
  std::vector<std::string> bridge_ports;                 // interface names
  bool empty() const { return processes.empty() && mounts.empty() && netns.empty() && bridge_ports.empty(); }
  // One line per leak ("process 123: containerd-shim-runc-v2 -namespace ...").
  std::vector<std::string> Describe(const LeakScope& scope) const;
};

ContainerdLeaks ScanLeaks(const LeakScope& scope);

// Kills the processes (through pidfds, so a reused pid is never hit), then
// unmounts (lazily, deepest first) what is mounted under scope.dir, removes
// the netns and deletes the bridge (the bridge plugin never does; the veths
// went with their netns). Goes on after a failure; returns the first one.
Status CleanUpLeaks(const LeakScope& scope);

// Names of the entries of `dir` ("." and ".." left out); empty if unreadable.
std::vector<std::string> DirEntries(const std::string& dir);

// Mount points strictly below `dir`, from /proc/self/mountinfo.
Result<std::vector<std::string>> MountsUnder(const std::string& dir);
// Unmounts (lazily, deepest first) every mount point strictly below `dir`.
Status UnmountUnder(const std::string& dir);

}  // namespace capsule::testing
