// containerd-shim-capsule-v2: thin main over the launcher. The serve hook
// is where the ttrpc Task service plugs in; until that layer is linked the
// daemon reports UNIMPLEMENTED and exits, so containerd sees a clear error.
#include "shim/launcher/launcher.h"

int main(int argc, char** argv) {
  capsule::shim::launcher::Hooks hooks;
  hooks.serve = [](capsule::shim::launcher::DaemonContext&) {
    return capsule::Unimplemented("the Task service is not linked into this shim yet");
  };
  return capsule::shim::launcher::Main(argc, argv, hooks);
}
