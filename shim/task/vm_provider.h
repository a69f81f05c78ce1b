// VmProvider: where a Sandbox gets its VM. The real one cold-boots through
// vm::SandboxVm (sandbox_vm_provider.h); unit tests plug in a fake. Later a
// warm-pool provider claims a pre-booted VM behind the same interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/vm/sandbox_vm.h"

namespace capsule::shim::task {

class VmProvider {
 public:
  virtual ~VmProvider() = default;
  virtual Result<vm::SandboxVmPtr> Boot(const vm::SandboxVmSpec& spec) = 0;
  // Takes over a VM a dead shim left running (the `delete` clean-up).
  virtual Result<vm::SandboxVmPtr> Adopt(const std::string& state_dir) = 0;
  // Where the VM with `vm_id` keeps its state (known before it boots).
  virtual std::string StateDirFor(std::string_view vm_id) const = 0;
};
using VmProviderPtr = std::unique_ptr<VmProvider>;

}  // namespace capsule::shim::task
