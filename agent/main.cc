// capsule-agent: PID 1 of every Capsule pod VM (or, with --no-init, a normal
// process for tests), the guest kernel's modprobe helper, and the pod
// holder. Thin main over agent/app, which tells the three apart.
#include "agent/app/agent.h"

int main(int argc, char** argv) { return capsule::agent::app::RunAgent(argc, argv); }
