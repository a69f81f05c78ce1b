// Where the pod's /dev/shm lives inside the guest, shared by the pod (which
// mounts it) and its containers' guest specs (which bind it).
#pragma once

#include <string_view>

namespace capsule::shim::pod {

// The pod's /dev/shm inside the guest: a tmpfs the agent mounts at
// CreateSandbox; every container of the pod binds it (CRI shares one
// /dev/shm per pod, which a host tmpfs cannot do across the VM boundary).
inline constexpr std::string_view kPodShmGuestPath = "/run/capsule/pod-shm";

}  // namespace capsule::shim::pod
