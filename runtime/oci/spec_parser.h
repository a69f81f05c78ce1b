// Parsers from OCI runtime-spec JSON to the typed model in spec.h. Unknown
// fields are ignored (forward compatibility); a present field of the wrong
// type or value is an INVALID_ARGUMENT naming its JSON path, e.g.
// "process.args[1]: must be a string".
#pragma once

#include <string_view>

#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::oci {

// A whole config.json. `process` and `root.path` are required.
Result<Spec> ParseSpec(std::string_view json);
// A standalone Process (an exec's spec); paths in errors start at its root.
Result<Process> ParseProcess(std::string_view json);
// A standalone LinuxResources (an update).
Result<LinuxResources> ParseLinuxResources(std::string_view json);

// Capability number for "CAP_CHOWN" (linux/capability.h), or -1.
int CapabilityFromName(std::string_view name);
// "CAP_CHOWN" for 0, "" when unknown.
std::string_view CapabilityName(int cap);
// RLIMIT_* number for "RLIMIT_NOFILE", or -1.
int RlimitFromName(std::string_view name);

}  // namespace capsule::oci
