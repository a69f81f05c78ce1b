// What is in <runtime.state_dir>/vm/: one entry per VM state dir, read
// from the hypervisor's vm.json without taking the VM over (for
// `capsule-runtime vm ls`; `vm stop` then adopts and stops one).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/config/config.h"
#include "runtime/vm/pod_record.h"

namespace capsule::vm {

struct VmListing {
  std::string id;
  std::string state_dir;
  pid_t vmm_pid = -1;
  bool vmm_running = false;  // that very QEMU process still runs
  std::string accelerator;   // "kvm" | "tcg"
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
  // Why the entry could not be read fully (no vm.json: a boot that failed
  // before QEMU started, or clean-up that did not finish).
  std::string problem;
  // The pod it serves (pod.json); nullopt for an idle pool VM or a boot in
  // progress, with pod_problem saying why when the file is unreadable.
  std::optional<PodRecord> pod;
  std::string pod_problem;
  // The VMM's resident memory and CPU time so far (0 when not running).
  uint64_t vmm_rss_bytes = 0;
  double vmm_cpu_seconds = 0;
};

// Sorted by id; an absent <state_dir>/vm is an empty list.
Result<std::vector<VmListing>> ListVms(const config::Config& config);

}  // namespace capsule::vm
