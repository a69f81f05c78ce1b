// capsule-agent: PID 1 of every Capsule pod VM (or, with --no-init, a normal
// process for tests), the guest kernel's modprobe helper, and the pod
// holder. Thin main over agent/app, agent/modules and agent/engine.
#include <string_view>

#include "agent/app/agent.h"
#include "agent/engine/pod_holder.h"
#include "agent/modules/modprobe_helper.h"

int main(int argc, char** argv) {
  // The guest kernel runs us as /sbin/capsule-modprobe to load a module.
  if (argc > 0 && capsule::agent::modules::IsModprobeHelper(argv[0]))
    return capsule::agent::modules::RunModprobeHelper(argc, argv);
  // The agent runs its own binary as each pod's holder (pod_holder.h).
  if (argc == 2 && std::string_view(argv[1]) == capsule::engine::kPodHolderArg)
    return capsule::engine::RunPodHolder();
  return capsule::agent::app::RunAgent(argc, argv);
}
