// <vm state dir>/pod.json: which pod a VM serves, written by the shim once
// the pod is ready (a cold-booted VM and a claimed pool VM alike). What
// `capsule-runtime ps` and the metrics endpoint label a VM with; it goes
// with the VM's dir. The dir is the host's alone (the guest's share is its
// shared/ subdir), and reading still bounds and checks every field.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::vm {

inline constexpr const char* kPodRecordFile = "pod.json";

struct PodRecord {
  std::string sandbox_id;     // containerd's id of the pod sandbox (or the task, for ctr)
  std::string ns;             // containerd namespace ("k8s.io", "default")
  std::string pod_name;       // CRI's io.kubernetes.cri.sandbox-name; "" outside CRI
  std::string pod_namespace;  // CRI's io.kubernetes.cri.sandbox-namespace
  pid_t shim_pid = 0;
  int64_t started_unix_ms = 0;  // when the pod became ready
  bool claimed = false;         // from the warm pool, else a cold boot
  double vm_ms = 0;             // the claim or the boot
  double setup_ms = 0;          // clock, RNG, CreateSandbox and network after it
};

Status WritePodRecord(const std::string& state_dir, const PodRecord& record);
// NOT_FOUND when the VM has none (an idle pool VM, a boot in progress);
// INVALID_ARGUMENT naming the file and the field when malformed.
Result<PodRecord> ReadPodRecord(const std::string& state_dir);
std::string PodRecordToJson(const PodRecord& record);
Result<PodRecord> PodRecordFromJson(std::string_view text, std::string_view source);

}  // namespace capsule::vm
