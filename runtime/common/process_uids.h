// Which host processes run as a uid, from /proc/<pid>/status (its real,
// effective, saved and filesystem uids): the owner of /proc/<pid> is not
// enough, since a process that changed its uid is not dumpable and its
// /proc directory then belongs to root.
#pragma once

#include <sys/types.h>

#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// Pids of the processes with `uid` as any of their four uids. Processes that
// end while /proc is read are skipped.
Result<std::vector<pid_t>> ProcessesRunningAs(uid_t uid);

}  // namespace capsule
