// The QEMU implementation of Hypervisor: launches qemu-system-x86_64 as a
// daemon (so a VM outlives the process that started it and can be adopted),
// drives it over QMP, and adopts VMs from their state dir.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include "runtime/config/config.h"
#include "runtime/hypervisor/accel_probe.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/hypervisor/qemu_probe.h"

namespace capsule::hypervisor {

struct QemuHypervisorOptions {
  // From spawn to the QMP greeting. QEMU 7.2 needs ~0.1-0.3 s here.
  std::chrono::milliseconds qmp_ready_timeout{10000};
  // Injected host facts (tests); probed when absent.
  std::optional<QemuCapabilities> capabilities;
  std::optional<KvmFacts> kvm_facts;
};

class QemuHypervisor final : public Hypervisor {
 public:
  explicit QemuHypervisor(config::Config config, QemuHypervisorOptions options = {});

  std::string_view name() const override { return "qemu"; }
  Result<VmmPtr> Launch(const VmSpec& spec) override;
  Result<VmmPtr> Attach(const std::string& state_dir) override;

  // The accelerator a VM asking for `requested` (nullopt: config's) gets.
  Result<AccelDecision> ResolveAccelerator(std::optional<config::Accelerator> requested);
  // Probes (once) what the configured QEMU binary supports.
  Result<QemuCapabilities> Capabilities();

  const config::Config& config() const { return config_; }

 private:
  const config::Config config_;
  const QemuHypervisorOptions options_;
  std::mutex mu_;
  std::optional<QemuCapabilities> caps_;  // guarded by mu_
  std::optional<KvmFacts> facts_;         // guarded by mu_
  bool warned_degraded_ = false;          // guarded by mu_
};

HypervisorPtr NewQemuHypervisor(const config::Config& config);

// What is left of a launch cut short between QEMU's start and its vm.json
// (the launcher was SIGKILLed): kills the QEMU whose command line names
// this state dir's console log, if one runs, and removes the VMM's files.
// NOT_FOUND when no such QEMU runs (or none was ever started: no vm.lock,
// which Launch makes first); FAILED_PRECONDITION when a live
// process holds the VM's lock (a launch still under way) or vm.json exists
// (Attach is the way to such a VM).
Status ReapUnrecordedQemu(const std::string& state_dir);

}  // namespace capsule::hypervisor
