// Process capabilities from the spec's five sets, applied in the child with
// raw prctl/capset (no allocation, no libcap state): the bounding set is
// trimmed while still root, the other sets after the uid change.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

struct CapabilityPlan {
  bool apply = false;  // spec has "capabilities"; absent: leave them as they are
  uint64_t bounding = 0, effective = 0, permitted = 0, inheritable = 0, ambient = 0;
  int last_cap = 40;  // /proc/sys/kernel/cap_last_cap
};

// Capabilities the running kernel does not know are dropped from the plan.
CapabilityPlan PlanCapabilities(const std::optional<oci::Capabilities>& caps, int last_cap);
// /proc/sys/kernel/cap_last_cap, or CAP_LAST_CAP of our headers.
int ReadLastCap();

// Child side, in this order around the uid change.
Status DropBoundingSet(const CapabilityPlan& plan);
Status ApplyCapabilities(const CapabilityPlan& plan);

}  // namespace capsule::engine
