// A pool VM's rehearsal of a container's start (agent.proto Rehearse): a
// CRI-like container (new pid, ipc, uts and mount namespaces, CRI's mounts,
// masked and read-only paths, the default capabilities) whose rootfs is a
// read-only bind of the guest's own root and whose process is the agent's
// binary with kRehearsalArg, which exits 0 at once. It is created, started,
// waited for and removed through the engine's own calls, so the first pod's
// container finds that code already run in this VM process (TCG translates
// guest code on first use; a clone's QEMU starts with none). Nothing stays:
// no cgroup, mount, process or directory.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "agent/engine/container_manager.h"
#include "runtime/common/status.h"

namespace capsule::engine {

// argv[1] that makes capsule-agent exit 0 at once (the rehearsal's process).
inline constexpr std::string_view kRehearsalArg = "--rehearsal";
inline constexpr const char* kRehearsalId = "capsule-rehearsal";
// Where the rehearsal's rootfs (the bind of /) is mounted while it runs.
inline constexpr const char* kRehearsalRoot = "/run/capsule/rehearsal";

// The rehearsal's spec as CRI would send it (so parsing it is rehearsed too).
std::string RehearsalSpecJson(const std::string& exe, const std::string& root);

// Runs the rehearsal on `engine`; returns its time in ms. The container is
// removed whatever happens; an error names the step.
Result<double> Rehearse(ContainerManager& engine, const std::string& exe, std::chrono::milliseconds timeout);

}  // namespace capsule::engine
