// Readers of /proc/<pid>/stat and /proc/<pid>/cmdline: the one place that
// knows their formats (the comm field of stat may hold spaces and ')', so
// fields are counted from the last ')'; cmdline is NUL-terminated words).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// The fields of /proc/<pid>/stat that Capsule reads.
struct ProcStat {
  char state = '?';           // field 3: R, S, D, Z, ...
  uint32_t flags = 0;         // field 9: the kernel's PF_* flags of its main thread
  uint64_t utime_ticks = 0;   // field 14, clock ticks
  uint64_t stime_ticks = 0;   // field 15
  uint64_t start_time = 0;    // field 22: clock ticks after boot (a process's identity with the pid)
};

// PF_EXITING (include/linux/sched.h): the thread is in do_exit. A killed
// process keeps its pid for a moment after its fds are closed; this says it
// is dying, not running.
inline constexpr uint32_t kProcFlagExiting = 0x4;
// True when the process is dying or dead: exiting, a zombie, or gone.
bool ProcessExiting(pid_t pid);

// NOT_FOUND when the process is gone; INTERNAL for a malformed file.
Result<ProcStat> ReadProcStat(pid_t pid);
// The same, from the file's text (`what` names it in errors): for tests and
// fuzzers.
Result<ProcStat> ParseProcStat(std::string_view text, const std::string& what);

// The process's arguments. NOT_FOUND when it is gone; empty for a kernel
// thread or a zombie.
Result<std::vector<std::string>> ReadCmdline(pid_t pid);

}  // namespace capsule
