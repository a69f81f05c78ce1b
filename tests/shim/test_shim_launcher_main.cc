// capsule-test-shim: the launcher alone, as containerd-shim-capsule-v2 is,
// with capsule-test-shimd beside it as its daemon.
#include "shim/launcher/launcher.h"

int main(int argc, char** argv) {
  capsule::shim::launcher::Hooks hooks;
  hooks.daemon_exe = capsule::shim::launcher::BesideSelf("capsule-test-shimd").value();
  return capsule::shim::launcher::Main(argc, argv, hooks);
}
