// `capsule-runtime vm ls`: the VMs in <runtime.state_dir>/vm, whether their
// QEMU still runs, and their size.
#include <cstdio>

#include "runtime/cli/command.h"
#include "runtime/vm/vm_listing.h"

namespace capsule::cli {
namespace {

int RunLs(const GlobalFlags& flags) {
  auto cfg = LoadConfigFor(flags, "vm ls");
  if (!cfg.ok()) return 1;
  auto vms = vm::ListVms(*cfg);
  if (!vms.ok()) return Fail("vm ls", vms.status());
  std::printf("%-32s %-8s %-8s %-5s %-5s %-8s %s\n", "ID", "STATE", "PID", "ACCEL", "VCPUS", "MEMORY", "STATE DIR");
  for (const vm::VmListing& l : *vms) {
    if (!l.problem.empty()) {
      std::printf("%-32s %-8s %-8s %-5s %-5s %-8s %s (%s)\n", l.id.c_str(), "broken", "-", "-", "-", "-",
                  l.state_dir.c_str(), l.problem.c_str());
      continue;
    }
    std::printf("%-32s %-8s %-8d %-5s %-5u %-8s %s\n", l.id.c_str(), l.vmm_running ? "running" : "exited", l.vmm_pid,
                l.accelerator.c_str(), l.vcpus, (std::to_string(l.memory_mib) + "M").c_str(), l.state_dir.c_str());
  }
  return 0;
}

}  // namespace

Command AddVmLsCommand(CLI::App& vm, const GlobalFlags& flags) {
  Command c;
  c.app = vm.add_subcommand("ls", "list the VMs in the state dir");
  c.run = [&flags] { return RunLs(flags); };
  return c;
}

}  // namespace capsule::cli
