// `capsule-runtime vm boot`: cold-boots one VM with the configured kernel
// and initrd, waits for the agent's Check over vsock, prints its Version and
// where the boot time went, then stops it (or, with --keep, leaves it for
// `vm stop`). Ctrl-C is honoured between steps, never leaving a VM behind.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "runtime/cli/command.h"
#include "runtime/cli/interrupt.h"
#include "runtime/hypervisor/vm_spec.h"
#include "runtime/vm/sandbox_vm.h"

namespace capsule::cli {
namespace {

using std::chrono::milliseconds;
// The guest's own power-off after DestroySandbox takes well under a second
// under TCG; past this the VMM is told to quit.
constexpr milliseconds kGracefulStop{5000};

struct BootFlags {
  vm::SandboxVmSpec spec;
  bool keep = false;
};

void PrintBoot(vm::SandboxVm& v, const agent::v1::VersionResponse& ver) {
  const vm::BootTimings& t = v.timings();
  std::printf("VM %s booted: QEMU pid %d, %s, state dir %s\n", v.id().c_str(), v.vmm_pid(),
              std::string(hypervisor::AcceleratorName(v.accelerator())).c_str(), v.state_dir().c_str());
  std::printf("agent: capsule-agent %s, API %u, guest kernel %s, serving %.3f s after guest kernel start\n",
              ver.agent_version().c_str(), ver.api_version(), ver.kernel_release().c_str(),
              static_cast<double>(ver.ready_monotonic_us()) / 1e6);
  std::printf("boot: %.0f ms total = prepare %.0f ms (state dir, vsock host end, virtiofsd) + VMM start %.0f ms "
              "(QEMU until QMP) + kernel and agent %.0f ms (until Check answered)\n",
              t.total_ms, t.prepare_ms, t.vmm_start_ms, t.agent_ready_ms);
  std::fflush(stdout);
}

int RunBoot(const GlobalFlags& flags, BootFlags bf) {
  auto cfg = LoadConfigFor(flags, "vm boot");
  if (!cfg.ok()) return 1;
  if (bf.spec.id.empty()) bf.spec.id = fmt::format("capsule-boot-{}", ::getpid());
  InterruptGuard interrupt;
  auto booted = vm::SandboxVm::Boot(*cfg, bf.spec);
  if (!booted.ok()) return Fail("vm boot", booted.status());
  vm::SandboxVm& v = **booted;
  auto client = v.agent();
  auto version = client.ok() ? (*client)->Version() : Result<agent::v1::VersionResponse>(client.status());
  if (!version.ok()) Fail("vm boot", version.status());
  if (version.ok()) PrintBoot(v, *version);
  if (bf.keep && version.ok() && !interrupt.Interrupted()) {
    Status st = v.Detach();
    if (!st.ok()) return Fail("vm boot", st);
    std::printf("left running; stop it with: capsule-runtime --config %s vm stop %s\n", flags.config_path.c_str(),
                v.id().c_str());
    return 0;
  }
  Status st = v.Stop(kGracefulStop);
  if (!st.ok()) return Fail("vm boot", st);
  std::printf("VM %s stopped; nothing left in %s\n", v.id().c_str(), v.state_dir().c_str());
  if (interrupt.Interrupted()) return 130;
  return version.ok() ? 0 : 1;
}

}  // namespace

Command AddVmBootCommand(CLI::App& vm, const GlobalFlags& flags) {
  auto bf = std::make_shared<BootFlags>();
  Command c;
  c.app = vm.add_subcommand("boot", "boot one VM, wait for its agent, print the boot timings, stop it");
  c.app->add_option("--id", bf->spec.id, "VM id (default capsule-boot-<pid>)");
  c.app->add_option("--vcpus", bf->spec.vcpus, "vCPUs (default guest.default_vcpus)")
      ->check(CLI::Range(1u, hypervisor::kMaxVcpus));
  c.app->add_option("--memory", bf->spec.memory_mib, "guest RAM in MiB (default guest.default_memory_mib)")
      ->check(CLI::Range(hypervisor::kMinMemoryMib, 1u << 20));
  c.app->add_option("--kernel-params", bf->spec.extra_kernel_params, "extra guest kernel parameters");
  c.app->add_flag("--keep", bf->keep, "leave the VM running (stop it later with `vm stop <id>`)");
  c.run = [&flags, bf] { return RunBoot(flags, *bf); };
  return c;
}

}  // namespace capsule::cli
