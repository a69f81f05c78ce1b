// What the shim leaves in a container's bundle so that `delete` (run by
// containerd after the shim died) can find and stop the VM and undo the
// host mounts: <bundle>/capsule.json, written before the VM boots.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::shim::launcher {

inline constexpr const char* kBundleRecordFile = "capsule.json";

struct BundleRecord {
  std::string sandbox_id;
  std::string vm_id;
  std::string vm_state_dir;
  std::string container_share_dir;  // host dir under the share holding this container's mounts
  std::string config_path;          // "" = the default config
  // The shim daemon that serves the container (its pod's), as
  // IdentifyProcess saw it: `delete` asks whether that very process still
  // runs, not whether the group's socket still takes connects (a child the
  // daemon forked, not yet exec'd, holds the socket a moment after the
  // daemon was killed). pid 0: not recorded (then the socket is asked).
  int64_t shim_pid = 0;
  uint64_t shim_start_time = 0;
  std::string shim_boot_id;

  bool operator==(const BundleRecord&) const = default;
};

Status WriteBundleRecord(const std::string& bundle, const BundleRecord& record);
// NOT_FOUND when absent; INVALID_ARGUMENT naming the file when malformed,
// and when its dirs are not what the shim writes: vm_state_dir absolute
// without "." or ".." parts, container_share_dir one directory in
// <vm_state_dir>/mounts/ (or empty).
Result<BundleRecord> ReadBundleRecord(const std::string& bundle);

// The file's text and back (for the two above and the fuzzer).
std::string BundleRecordToJson(const BundleRecord& record);
Result<BundleRecord> BundleRecordFromJson(std::string_view text, std::string_view source);

}  // namespace capsule::shim::launcher
