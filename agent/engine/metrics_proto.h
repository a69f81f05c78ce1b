// CgroupMetrics -> io.containerd.cgroups.v2.Metrics, for StatsContainer.
// Its own library (capsule_engine_proto) so the engine itself stays free of
// protobuf; the RPC handler links this edge conversion.
#pragma once

#include "agent/engine/cgroup_manager.h"
#include "cgroups/v2/metrics.pb.h"

namespace capsule::engine {

void ToProto(const CgroupMetrics& in, io::containerd::cgroups::v2::Metrics* out);

}  // namespace capsule::engine
