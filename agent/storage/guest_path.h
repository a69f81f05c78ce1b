// Checks on paths that arrive in requests before they reach a syscall.
#pragma once

#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::storage {

// INVALID_ARGUMENT naming `field` unless `path` is absolute, shorter than
// PATH_MAX, free of NUL bytes and of ".." components.
Status CheckAbsolutePath(std::string_view field, std::string_view path);

}  // namespace capsule::agent::storage
