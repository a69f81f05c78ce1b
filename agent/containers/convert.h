// protobuf <-> engine conversions for the container RPCs (Kata's trans_*
// files): the engine never sees a generated type, the handlers never build
// a message field by field.
#pragma once

#include <vector>

#include "agent/engine/container.h"
#include "agent/engine/process.h"
#include "agent/engine/stdio.h"
#include "agent/net/types.h"
#include "capsule/agent/v1/agent.pb.h"

namespace capsule::agent::containers {

namespace v1 = ::capsule::agent::v1;

v1::WaitProcessResponse WaitResponseFromExit(const engine::ExitInfo& exit);
v1::ListProcessesResponse ProcessListToProto(const std::vector<engine::ProcessInfo>& processes);
v1::ReadStreamResponse ReadResultToProto(engine::ReadResult&& read);
void NetworkStatsToProto(const std::vector<net::InterfaceStats>& stats, v1::StatsContainerResponse* out);

}  // namespace capsule::agent::containers
