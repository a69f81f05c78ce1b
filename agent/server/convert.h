// protobuf <-> domain conversions for the sandbox RPCs, kept at the edge so
// the pod code (agent/pod) never sees a generated type.
#pragma once

#include "agent/pod/pod_spec.h"
#include "agent/storage/storage.h"
#include "capsule/agent/v1/agent.pb.h"

namespace capsule::agent::server {

storage::StorageSpec StorageFromProto(const ::capsule::agent::v1::Storage& s);
pod::PodSpec PodSpecFromProto(const ::capsule::agent::v1::CreateSandboxRequest& req);

}  // namespace capsule::agent::server
