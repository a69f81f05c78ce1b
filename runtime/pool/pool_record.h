// <vm state dir>/pool.json: the pool's mark on a VM it booted. While it is
// there the VM is the pool's (idle) or in hand-over to a claimant (claimed);
// the claimant deletes it once it has adopted the VM (holding vm.lock), and
// from then on the VM is the claimant's alone. A restarted daemon reads these
// to reap what it left: idle VMs, and claimed ones no live claimant took.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/host/daemon.h"

namespace capsule::pool {

inline constexpr const char* kPoolRecordFile = "pool.json";

struct PoolRecord {
  std::string shape_key;
  int64_t created_unix_ms = 0;  // >= 0
  bool claimed = false;
  // When claimed: who took it, and when.
  std::string sandbox_id;
  ProcessIdentity claimant;  // pid > 0
  int64_t claimed_unix_ms = 0;  // >= 0

  bool operator==(const PoolRecord& o) const;
};

Status WritePoolRecord(const std::string& state_dir, const PoolRecord& record);
// NOT_FOUND when the dir has none (not a pool VM, or already adopted);
// INVALID_ARGUMENT naming the file and field when malformed.
Result<PoolRecord> ReadPoolRecord(const std::string& state_dir);

// The file's text and back, for the two above and the fuzzer. Reading takes
// a value only when it fits its field exactly: a pid out of pid_t's range or
// a negative time is an error, never a silently different number.
std::string PoolRecordToJson(const PoolRecord& record);
Result<PoolRecord> PoolRecordFromJson(std::string_view text, std::string_view source);
// The claimant's step once it holds vm.lock. Absent is fine.
Status RemovePoolRecord(const std::string& state_dir);

int64_t NowUnixMs();

}  // namespace capsule::pool
