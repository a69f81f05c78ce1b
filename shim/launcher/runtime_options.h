// Runtime options containerd hands to `start` on stdin: a serialized
// google.protobuf.Any. For a runtime that is not runc, the CRI plugin fills
// runtimeoptions.v1.Options from the runtime's `options` table
// (pkg/cri/server/helpers.go, getRuntimeOptionsType); `ConfigPath` names
// Capsule's config file.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::shim::launcher {

struct RuntimeOptions {
  std::string config_path;  // empty: use the default config
};

// Parses the Any's bytes; empty input means no options. The type_url may be
// bare ("runtimeoptions.v1.Options", what containerd's typeurl writes) or
// carry a "<host>/" prefix. Any other type is INVALID_ARGUMENT, naming it.
Result<RuntimeOptions> ParseRuntimeOptions(std::string_view any_bytes);

// Reads `fd` to EOF, at most `limit` bytes. Does not read a terminal (a
// person running the shim by hand has nothing to send).
Result<std::string> ReadOptionsInput(int fd, size_t limit);

// Serializes options as containerd does (bare type_url); for tests/tools.
std::string SerializeRuntimeOptions(const RuntimeOptions& options, std::string_view type_url);

}  // namespace capsule::shim::launcher
