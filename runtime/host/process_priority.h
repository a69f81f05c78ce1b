// CPU priority (nice) of host processes: the warm pool boots and restores
// its refills below the pods' priority, so that on a busy host a pod's
// start is not slowed by the pool making the next VM (issue: refills yield
// the CPU to claims), and gives a VM the normal priority back at its claim.
// Linux keeps a nice value per thread, and a thread's children and threads
// start with its value: a refill thread lowers its own before it spawns a
// VM's processes, and a claim resets every thread of them.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// The nice value of the pool's refill boots and restores.
inline constexpr int kRefillNice = 10;
// A nice value ranks a thread only among those of its own scheduling group
// (its cpu cgroup, or in the root group its session's autogroup), so the
// pool's cgroup gets the same rank as a whole: a nice-10 thread weighs
// about a tenth of a nice-0 one (110 against 1024), cgroup v2 weight 10.
inline constexpr uint32_t kRefillCpuWeight = 10;

// Sets the calling thread's nice value (not the whole process's).
Status SetThreadNice(int nice);
// Sets the nice value of every thread of each process in `pids`. Raising a
// priority (a lower value) needs CAP_SYS_NICE. A process that exited
// meanwhile is skipped.
Status SetProcessesNice(const std::vector<pid_t>& pids, int nice);

}  // namespace capsule
