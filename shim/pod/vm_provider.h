// VmProvider: where a Sandbox gets its VM: claimed from the warm pool
// (capsule-poold) when one is ready, else cold-booted through vm::SandboxVm
// (sandbox_vm_provider.h); unit tests plug in a fake.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/vm/sandbox_vm.h"

namespace capsule::shim::pod {

// Who claims a pooled VM (for the pool's record and logs).
struct PoolClaimant {
  std::string ns;
  std::string sandbox_id;
  std::string pod;  // "namespace/name" from CRI's annotations, when known
};

// Called with a claimed VM's id and state dir after the pool handed it over
// and before this process adopts it: the bundle record must name it by
// then, so that `shim delete` finds it should the shim die in between.
using RecordClaimedVm = std::function<Status(const std::string& vm_id, const std::string& state_dir)>;

class VmProvider {
 public:
  virtual ~VmProvider() = default;
  virtual Result<vm::SandboxVmPtr> Boot(const vm::SandboxVmSpec& spec) = 0;
  // A ready VM of the spec's shape from the warm pool, adopted by this
  // process with its agent answering; nullptr on a miss with `*miss` saying
  // why (no daemon, none ready, a slow or bad answer...). Never an error
  // the pod should fail for: the caller cold-boots instead.
  virtual vm::SandboxVmPtr Claim(const vm::SandboxVmSpec& spec, const PoolClaimant& who,
                                 const RecordClaimedVm& record, std::string* miss) = 0;
  // Takes over a VM a dead shim left running (the `delete` clean-up).
  virtual Result<vm::SandboxVmPtr> Adopt(const std::string& state_dir) = 0;
  // Where the VM with `vm_id` keeps its state (known before it boots).
  virtual std::string StateDirFor(std::string_view vm_id) const = 0;
};
using VmProviderPtr = std::unique_ptr<VmProvider>;

}  // namespace capsule::shim::pod
