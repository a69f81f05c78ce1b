// Bounding log files that a peer we do not trust can make grow: a guest's
// serial console (QEMU writes what the guest prints), and the logs of the
// per-VM daemons (QEMU, virtiofsd, capsule-vsockd), which a guest can fill
// with warnings. They live on tmpfs under /run, so unbounded means host RAM.
// Every writer of such a file opens it O_APPEND, so after a trim its next
// write lands at the new end, not at its old offset.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace capsule {

struct LogTrim {
  uint64_t size_before = 0;
  uint64_t dropped = 0;  // 0: the file was within bounds (or is missing)
};

// When the regular file at `path` is over `max_bytes`, keeps only its last
// `keep_bytes` (from a line start when one is near), behind one line saying
// how much was dropped. A missing file is not an error; a symlink or a
// non-regular file is (never followed).
Result<LogTrim> TrimLogFile(const std::string& path, uint64_t max_bytes, uint64_t keep_bytes);

}  // namespace capsule
