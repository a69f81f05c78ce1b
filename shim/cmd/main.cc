// containerd-shim-capsule-v2: thin main over the launcher, with the Task
// service (shim/service) as the daemon's serve hook and the VM clean-up as
// `delete`'s hook.
#include "shim/launcher/launcher.h"
#include "shim/service/daemon_hooks.h"

#if CAPSULE_HAVE_VM
#include "shim/task/sandbox_vm_provider.h"
#endif

namespace {

using namespace capsule;

#if CAPSULE_HAVE_VM
shim::task::VmProviderPtr MakeVmProvider(const config::Config& config) {
  return std::make_unique<shim::task::SandboxVmProvider>(config);
}
#else
// Until runtime/vm's implementation is linked: every boot fails clearly.
class NoVmProvider : public shim::task::VmProvider {
 public:
  Result<vm::SandboxVmPtr> Boot(const vm::SandboxVmSpec&) override { return Missing(); }
  vm::SandboxVmPtr Claim(const vm::SandboxVmSpec&, const shim::task::PoolClaimant&, const shim::task::RecordClaimedVm&,
                         std::string* miss) override {
    *miss = "no VM support linked";
    return nullptr;
  }
  Result<vm::SandboxVmPtr> Adopt(const std::string&) override { return NotFound("no VM support linked"); }
  std::string StateDirFor(std::string_view vm_id) const override { return "/run/capsule/vm/" + std::string(vm_id); }

 private:
  static Status Missing() { return Unimplemented("this shim was built without runtime/vm (SandboxVm)"); }
};
shim::task::VmProviderPtr MakeVmProvider(const config::Config&) { return std::make_unique<NoVmProvider>(); }
#endif

}  // namespace

int main(int argc, char** argv) {
  capsule::shim::launcher::Hooks hooks;
  hooks.serve = [](capsule::shim::launcher::DaemonContext& ctx) {
    return capsule::shim::service::Serve(ctx, MakeVmProvider);
  };
  hooks.cleanup = [](const capsule::shim::launcher::CleanupContext& ctx) {
    return capsule::shim::service::Cleanup(ctx, MakeVmProvider);
  };
  return capsule::shim::launcher::Main(argc, argv, hooks);
}
