// containerd-shim-capsule-v2: what containerd runs for every task's start
// and delete. It links only the launcher, so it loads in a fraction of the
// time capsule-shimd (gRPC, QEMU, netlink) takes; it spawns capsule-shimd as
// the pod's daemon and hands it the deletes that have clean-up to do.
#include <cstdio>

#include "shim/launcher/launcher.h"

int main(int argc, char** argv) {
  capsule::shim::launcher::Hooks hooks;
  auto daemon = capsule::shim::launcher::BesideSelf(capsule::shim::launcher::kDaemonName);
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s: %s\n", capsule::shim::launcher::kShimName, daemon.status().ToString().c_str());
    return 1;
  }
  hooks.daemon_exe = std::move(*daemon);
  return capsule::shim::launcher::Main(argc, argv, hooks);
}
