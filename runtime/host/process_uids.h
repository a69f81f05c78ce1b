// Which host processes run as a uid, from /proc/<pid>/status (its real,
// effective, saved and filesystem uids): the owner of /proc/<pid> is not
// enough, since a process that changed its uid is not dumpable and its
// /proc directory then belongs to root.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// One field of a /proc/<pid>/status text ("Uid", "CapEff") or of any /proc
// file of "Key: value" lines (smaps_rollup): what follows the colon,
// leading blanks dropped; empty when the field is absent.
std::string StatusField(std::string_view status, std::string_view key);

// Pids of the processes with `uid` as any of their four uids. Processes that
// end while /proc is read are skipped.
Result<std::vector<pid_t>> ProcessesRunningAs(uid_t uid);

}  // namespace capsule
