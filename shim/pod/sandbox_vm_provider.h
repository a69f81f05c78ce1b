// The real VmProvider: claims from capsule-poold at pool.socket, cold boots
// and adoption through vm::SandboxVm (QEMU, virtiofsd, the vsock host end,
// the agent connection).
#pragma once

#include "runtime/config/config.h"
#include "shim/pod/vm_provider.h"

namespace capsule::shim::pod {

class SandboxVmProvider : public VmProvider {
 public:
  explicit SandboxVmProvider(config::Config config) : config_(std::move(config)) {}
  Result<vm::SandboxVmPtr> Boot(const vm::SandboxVmSpec& spec) override;
  vm::SandboxVmPtr Claim(const vm::SandboxVmSpec& spec, const PoolClaimant& who, const RecordClaimedVm& record,
                         std::string* miss) override;
  Result<vm::SandboxVmPtr> Adopt(const std::string& state_dir) override;
  std::string StateDirFor(std::string_view vm_id) const override;

 private:
  const config::Config config_;
};

}  // namespace capsule::shim::pod
