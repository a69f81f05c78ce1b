// The fault switch itself: a gRPC server interceptor that holds the calls a
// FaultPlan names before their handlers run (hang: until the caller gives
// up; delay: for the rule's time). Only capsule-agent-faults installs it.
#pragma once

#include <memory>
#include <string>

#include "agent/faults/fault_plan.h"
#include "agent/server/grpc_server.h"

namespace capsule::agent::faults {

// The interceptor factories for AgentServer::Start; none for an empty plan.
server::InterceptorFactories FaultInterceptors(std::shared_ptr<FaultPlan> plan);

// capsule.fault's value on this kernel command line ("" when absent).
std::string FaultSpecFromCmdline(const std::string& cmdline_path = "/proc/cmdline");

}  // namespace capsule::agent::faults
