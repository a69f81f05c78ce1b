// fstab-style mount options ("ro,nosuid,size=64m") split into what mount(2)
// takes: MS_* flags, a propagation change applied by a second call, and the
// filesystem's own data string.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::storage {

struct MountOptions {
  unsigned long flags = 0;        // MS_RDONLY, MS_NOSUID, MS_BIND, MS_REC, ...
  unsigned long propagation = 0;  // one of MS_SHARED/MS_SLAVE/MS_PRIVATE/MS_UNBINDABLE, maybe | MS_REC
  std::string data;               // "size=64m,mode=0755": passed to the filesystem

  bool operator==(const MountOptions&) const = default;
};

// Each element may itself hold comma-separated options. Unknown words go to
// the data string; an empty word or a NUL byte is INVALID_ARGUMENT.
Result<MountOptions> ParseMountOptions(const std::vector<std::string>& options);

}  // namespace capsule::agent::storage
