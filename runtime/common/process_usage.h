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

// The bytes of the process's memory no other process maps (Private_Clean +
// Private_Dirty of /proc/<pid>/smaps_rollup): what stopping it gives back.
// A copy-on-write clone's QEMU counts the template pages it wrote, not the
// ones it shares. NOT_FOUND once the process is gone.
Result<uint64_t> PrivateBytes(pid_t pid);

// Resident bytes of the process's writable and executable private mappings:
// for QEMU under TCG, its translation cache (the code buffer it maps rwx),
// which does not exist under KVM, so memory figures are given without it
// too. NOT_FOUND once the process is gone.
Result<uint64_t> TcgCacheBytes(pid_t pid);

}  // namespace capsule
