// `capsule-runtime vm ...`: the VM as a unit, for operators and developers:
// boot one from the configured image, list the VMs in the state dir, stop one.
#include "runtime/cli/command.h"

namespace capsule::cli {

std::vector<Command> AddVmCommands(CLI::App& parent, const GlobalFlags& flags) {
  CLI::App* vm = parent.add_subcommand("vm", "boot, list and stop pod VMs (runtime.state_dir/vm/<id>)");
  vm->require_subcommand(1);
  return {AddVmBootCommand(*vm, flags), AddVmLsCommand(*vm, flags), AddVmStopCommand(*vm, flags)};
}

}  // namespace capsule::cli
