// capsule-agent: PID 1 of every Capsule pod VM (or, with --no-init, a normal
// process for tests). Thin main over agent/app.
#include "agent/app/agent.h"

int main(int argc, char** argv) { return capsule::agent::app::RunAgent(argc, argv); }
