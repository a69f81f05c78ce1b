// Edge conversions between containerd's task protos and the shim's own
// types (Kata's trans_* files play this role).
#pragma once

#include <google/protobuf/any.pb.h>

#include <string>
#include <vector>

#include "capsule/agent/v1/agent.pb.h"
#include "containerd/task/v2/shim.pb.h"
#include "containerd/types/task.pb.h"
#include "shim/mount/mounter.h"
#include "shim/task/container.h"
#include "shim/task/task_manager.h"

namespace capsule::shim::service {

// containerd types.Mount list -> MountSpecs (target left empty).
std::vector<mount::MountSpec> ToMountSpecs(
    const google::protobuf::RepeatedPtrField<containerd::types::Mount>& mounts);

task::CreateParams ToCreateParams(const containerd::task::v2::CreateTaskRequest& req);

// The containerd status of a process: a running process of a paused
// container is PAUSED.
containerd::v1::types::Status ToTaskStatus(task::ProcessState state, bool paused);

// StateResponse for one process.
containerd::task::v2::StateResponse ToStateResponse(const task::Container& container, const task::Process& process);

// The agent's cgroup v2 metrics as the Any CRI's stats decode (bare
// type_url "io.containerd.cgroups.v2.Metrics").
google::protobuf::Any ToStatsAny(const capsule::agent::v1::StatsContainerResponse& stats);

// The OCI Process JSON of an Exec's spec Any, validated; INVALID_ARGUMENT
// names the field.
Result<std::string> ExecProcessJson(const google::protobuf::Any& spec);
// The LinuxResources JSON of an Update's resources Any, validated.
Result<std::string> ResourcesJson(const google::protobuf::Any& resources);

}  // namespace capsule::shim::service
