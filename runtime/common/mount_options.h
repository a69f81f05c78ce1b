// Mount options as mount(8) spells them ("ro,nosuid,size=64m", or one word
// per element as OCI gives them) split into what mount(2) takes: MS_* flags,
// propagation changes (each its own mount call), and the filesystem's data
// string. The one table of option words for the shim, the agent's storages
// and its containers' mounts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

struct MountOptions {
  unsigned long flags = 0;                 // MS_RDONLY, MS_NOSUID, ... (MS_BIND|MS_REC for rbind)
  std::vector<unsigned long> propagation;  // in order, each one mount call: MS_PRIVATE|MS_REC, ...
  std::string data;                        // "mode=755,size=65536k": passed to the filesystem

  bool bind() const;
  // Flags a bind mount needs a second MS_REMOUNT|MS_BIND call for (the
  // kernel ignores them on the first bind call).
  unsigned long bind_remount_flags() const;
  bool operator==(const MountOptions&) const = default;
};

// mount(2) copies at most one page of data: a longer data string is refused.
inline constexpr size_t kMaxMountDataBytes = 4096 - 1;

// Each element may hold several comma-separated words. Known words set or
// clear flags, later ones winning as in mount(8); propagation words become
// propagation calls; the rest go to `data` in order. `type` "bind" implies
// MS_BIND. INVALID_ARGUMENT for an empty word, a NUL byte or data over
// kMaxMountDataBytes, naming the element.
Result<MountOptions> ParseMountOptions(std::string_view type, const std::vector<std::string>& options);

// "rprivate" -> MS_PRIVATE|MS_REC; 0 for "" or an unknown name.
unsigned long PropagationFlags(std::string_view name);

}  // namespace capsule
