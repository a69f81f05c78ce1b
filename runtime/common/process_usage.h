// What a host process costs right now: resident memory and CPU time, read
// from /proc (for `capsule-runtime ps` and the metrics endpoint).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "runtime/common/status.h"

namespace capsule {

struct ProcessUsageSample {
  uint64_t rss_bytes = 0;    // /proc/<pid>/statm resident pages
  double cpu_seconds = 0;    // user + system time, /proc/<pid>/stat fields 14 and 15
};

// NOT_FOUND once the process is gone.
Result<ProcessUsageSample> ProcessUsage(pid_t pid);

}  // namespace capsule
