// See sandbox_vm_provider.h.
#include "shim/task/sandbox_vm_provider.h"

namespace capsule::shim::task {

Result<vm::SandboxVmPtr> SandboxVmProvider::Boot(const vm::SandboxVmSpec& spec) {
  return vm::SandboxVm::Boot(config_, spec);
}

Result<vm::SandboxVmPtr> SandboxVmProvider::Adopt(const std::string& state_dir) {
  return vm::SandboxVm::Adopt(config_, state_dir);
}

std::string SandboxVmProvider::StateDirFor(std::string_view vm_id) const {
  return vm::SandboxVm::StateDirFor(config_, vm_id);
}

}  // namespace capsule::shim::task
