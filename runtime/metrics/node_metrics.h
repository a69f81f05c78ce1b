// Everything `capsule-runtime metrics` exports about this node, collected
// on each scrape: per VM (labelled by VM id and, for a pod's VM, the
// sandbox id and the CRI pod name and namespace) the claim or boot time,
// the host processes' memory and CPU (QEMU, virtiofsd, capsule-vsockd, the
// shim), the guest's own memory and load (through its agent); and the warm
// pool's counts from capsule-poold. Read-only: no VM is taken over.
#pragma once

#include <chrono>
#include <string>

#include "runtime/config/config.h"

namespace capsule::metrics {

struct CollectOptions {
  // Ask each pod's guest for its memory and load (one agent connection per
  // VM per scrape), each bounded by guest_timeout.
  bool guest = true;
  std::chrono::milliseconds guest_timeout{2000};
  std::chrono::milliseconds pool_timeout{1000};
};

// The exposition text (prometheus_text.h).
std::string CollectNodeMetrics(const config::Config& config, const CollectOptions& options = {});

}  // namespace capsule::metrics
