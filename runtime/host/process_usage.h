// What a host process costs right now: resident memory and CPU time, read
// from /proc (for `capsule-runtime ps` and the metrics endpoint).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule {

struct ProcessUsageSample {
  uint64_t rss_bytes = 0;    // /proc/<pid>/statm resident pages
  double cpu_seconds = 0;    // user + system time, /proc/<pid>/stat fields 14 and 15
};

// NOT_FOUND once the process is gone.
Result<ProcessUsageSample> ProcessUsage(pid_t pid);

// Nanoseconds the process's threads have run or waited to run on a CPU
// (/proc/<pid>/task/*/schedstat, its first two fields), summed: it stays
// put only while every thread sleeps, even when the host is too busy to
// run them. Threads that exited are not in it. NOT_FOUND once it is gone.
Result<uint64_t> ThreadsBusyNs(pid_t pid);

// A process's memory now, in bytes: resident (VmRSS) and its anonymous,
// file and shared-memory parts from /proc/<pid>/status; from
// /proc/<pid>/smaps, Pss (each page divided among the processes mapping
// it) and its own memory: the anonymous pages no other process maps (heap,
// stacks, copy-on-write copies). Pages of a file or of shared memory are
// the file's, even where only this process maps them: a copy-on-write
// clone's QEMU owns the template pages it wrote, not those it reads, even
// those no other clone reads (the template counts them once). A VM's own
// RAM memfd is not in it either: callers count that file apart.
// NOT_FOUND once it is gone.
struct ProcessMemory {
  uint64_t rss = 0, rss_anon = 0, rss_file = 0, rss_shmem = 0;
  uint64_t pss = 0, own_bytes = 0;
};
Result<ProcessMemory> ReadProcessMemory(pid_t pid);

// Of that own memory, the part in mappings of the file whose name contains
// `file` ("memfd:capsule-template-": the guest pages a copy-on-write clone
// wrote). NOT_FOUND once it is gone.
Result<uint64_t> OwnBytesIn(pid_t pid, std::string_view file);

// Resident bytes of the process's writable and executable private mappings:
// for QEMU under TCG, its translation cache (the code buffer it maps rwx),
// which does not exist under KVM, so memory figures are given without it
// too. NOT_FOUND once the process is gone.
Result<uint64_t> TcgCacheBytes(pid_t pid);

}  // namespace capsule
