// What one container process (the init's `process` in config.json, or an
// exec's process spec) may carry into the guest: args and env are arrays of
// strings, each at most what one Linux exec takes (MAX_ARG_STRLEN, 128 KiB),
// together at most ARG_MAX with the default 8 MiB stack (2 MiB). Anything
// larger could never start in the guest; refused here, it fails before a
// VM is touched, with the field and the size in the message, instead of as
// E2BIG from the guest or a gRPC size error from the channel.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/common/status.h"

namespace capsule::shim::task {

inline constexpr size_t kMaxProcessStringBytes = 128 * 1024;
inline constexpr size_t kMaxProcessArgvEnvBytes = 2 * 1024 * 1024;

// `process`: the OCI process object; `what` names it in errors ("process",
// "exec e1 of container c1: process").
Status CheckProcessLimits(const nlohmann::json& process, std::string_view what);

}  // namespace capsule::shim::task
