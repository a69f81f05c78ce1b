// CgroupManager / Cgroup: the container engine's view of cgroups, apart
// from the implementation (cgroup2.h) so tests can plug in fakes. One Cgroup
// per container: limits, membership, stats, freezing, killing, removal.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// What io.containerd.cgroups.v2.Metrics carries; a section is absent when
// its controller is not enabled for the cgroup. "max" reads as UINT64_MAX.
struct CgroupMetrics {
  struct Pids {
    uint64_t current = 0;
    uint64_t limit = 0;
  };
  struct Cpu {
    uint64_t usage_usec = 0, user_usec = 0, system_usec = 0;
    uint64_t nr_periods = 0, nr_throttled = 0, throttled_usec = 0;
  };
  struct Memory {
    uint64_t usage = 0, usage_limit = 0, swap_usage = 0, swap_limit = 0;
    // memory.stat, by the key names the kernel uses ("anon", "file", ...).
    std::vector<std::pair<std::string, uint64_t>> stat;
    uint64_t Stat(const std::string& key) const;
  };
  struct MemoryEvents {
    uint64_t low = 0, high = 0, max = 0, oom = 0, oom_kill = 0;
  };
  struct IoEntry {
    uint64_t major = 0, minor = 0, rbytes = 0, wbytes = 0, rios = 0, wios = 0;
  };
  struct HugeTlb {
    std::string pagesize;
    uint64_t current = 0, max = 0;
  };
  std::optional<Pids> pids;
  std::optional<Cpu> cpu;
  std::optional<Memory> memory;
  std::optional<MemoryEvents> memory_events;
  std::vector<IoEntry> io;
  std::vector<HugeTlb> hugetlb;
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;

  // Filesystem path of the cgroup directory.
  virtual const std::string& path() const = 0;
  // Writes the limits present in `resources` (absent ones are left alone).
  virtual Status Apply(const oci::LinuxResources& resources) = 0;
  // cgroup.procs opened for writing: a child writes "0" to join before it
  // creates its cgroup namespace, so the namespace root is this cgroup.
  virtual Result<UniqueFd> OpenProcs() = 0;
  virtual Status AddProcess(pid_t pid) = 0;
  // Processes in the cgroup, as seen from the caller's pid namespace.
  virtual Result<std::vector<pid_t>> Pids() = 0;
  // Sends `signal` to every process; SIGKILL uses cgroup.kill when present.
  virtual Status SignalAll(int signal) = 0;
  // Freezes (waits until the kernel reports frozen) or thaws.
  virtual Status Freeze(bool frozen, std::chrono::milliseconds timeout) = 0;
  virtual Result<CgroupMetrics> Stats() = 0;
  // memory.events oom_kill; 0 without the memory controller.
  virtual uint64_t OomKillCount() = 0;
  // memory.events path to watch for OOM kills; empty when not available.
  virtual std::string MemoryEventsPath() const = 0;
  // Waits until no process is left, then removes the directory.
  virtual Status Destroy(std::chrono::milliseconds timeout) = 0;
};
using CgroupPtr = std::unique_ptr<Cgroup>;

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;
  // Creates the cgroup at `relative_path` (parents included, controllers
  // enabled on the way). ALREADY_EXISTS if the leaf exists.
  virtual Result<CgroupPtr> Create(const std::string& relative_path) = 0;
  // Controllers the hierarchy offers to a new cgroup (cgroup.controllers).
  virtual std::vector<std::string> AvailableControllers() const = 0;
};
using CgroupManagerPtr = std::unique_ptr<CgroupManager>;

}  // namespace capsule::engine
