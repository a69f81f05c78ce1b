// Per-section parsers shared by the spec_parser*.cc files. Each reads one
// JSON object (already located by path) into its struct.
#pragma once

#include "runtime/common/json_field.h"
#include "runtime/oci/spec.h"

namespace capsule::oci::internal {

Status ParseProcess(const JsonField& f, Process* out);
Status ParseLinux(const JsonField& f, Linux* out);
Status ParseResources(const JsonField& f, LinuxResources* out);
Status ParseSeccomp(const JsonField& f, Seccomp* out);

}  // namespace capsule::oci::internal
