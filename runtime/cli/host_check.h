// What `capsule-runtime check` verifies: everything a pod VM needs from this
// host, each item with a verdict and the reason, so an operator sees at once
// why a host cannot run pods (or runs them slowly, under TCG).
#pragma once

#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace capsule::cli {

enum class Verdict { kOk, kWarn, kFail };

struct CheckItem {
  std::string name;    // "accelerator", "qemu", "guest kernel", ...
  Verdict verdict = Verdict::kOk;
  std::string detail;  // what was found, or why not
};

struct HostReport {
  std::vector<CheckItem> items;
  // Shouted on its own line: TCG standing in for KVM.
  std::vector<std::string> warnings;
  bool can_run_pods() const;
  // One line: "this host can run Capsule pods (...)" or "... cannot ...: <first failure>".
  std::string Summary() const;
};

// QEMU devices a Capsule VM is built from (QEMU's -device names; the
// virtio-serial pair carries the serial vsock).
inline constexpr const char* kRequiredQemuDevices[] = {"vhost-user-vsock-pci", "vhost-user-fs-pci", "virtio-net-pci",
                                                       "pcie-root-port", "virtio-serial-pci", "virtserialport"};

HostReport CheckHost(const config::Config& config);

}  // namespace capsule::cli
