// Container lifecycle: CREATED -> RUNNING <-> PAUSED, and any of them ->
// STOPPED when the init process exits. An illegal move is a
// FAILED_PRECONDITION naming the container and both states.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::engine {

enum class ContainerState { kCreated, kRunning, kPaused, kStopped };

std::string_view StateName(ContainerState state);

// OK when `from` -> `to` is a legal transition; else
// "container c1: cannot go from stopped to running".
Status CheckTransition(std::string_view container_id, ContainerState from, ContainerState to);

}  // namespace capsule::engine
