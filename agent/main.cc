// capsule-agent: PID 1 of every Capsule pod VM (or, with --no-init, a normal
// process for tests), and the guest kernel's modprobe helper. Thin main over
// agent/app and agent/modules.
#include "agent/app/agent.h"
#include "agent/modules/modprobe_helper.h"

int main(int argc, char** argv) {
  // The guest kernel runs us as /sbin/capsule-modprobe to load a module.
  if (argc > 0 && capsule::agent::modules::IsModprobeHelper(argv[0]))
    return capsule::agent::modules::RunModprobeHelper(argc, argv);
  return capsule::agent::app::RunAgent(argc, argv);
}
