// OCI linux.seccomp -> a BPF program compiled by libseccomp in the parent
// (so an unknown syscall or architecture is an error naming the field,
// before any fork), loaded in the child with seccomp(2) right before execve.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

struct SeccompProgram {
  std::vector<sock_filter> filter;
  unsigned int flags = 0;  // SECCOMP_FILTER_FLAG_*
};

Result<SeccompProgram> CompileSeccomp(const oci::Seccomp& spec);

// Child side. Needs no_new_privs or CAP_SYS_ADMIN.
Status LoadSeccomp(const SeccompProgram& program);

}  // namespace capsule::engine
