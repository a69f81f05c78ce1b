// capsule-shimd: the shim daemon that serves a pod's Task API (ttrpc), and
// the clean-up `delete` runs after a daemon died. containerd-shim-capsule-v2
// starts it and hands `delete` to it; it takes start itself as well.
#include "shim/launcher/launcher.h"
#include "shim/pod/sandbox_vm_provider.h"
#include "shim/service/daemon_hooks.h"

namespace {

using namespace capsule;

shim::pod::VmProviderPtr MakeVmProvider(const config::Config& config) {
  return std::make_unique<shim::pod::SandboxVmProvider>(config);
}

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
