// See share_release.h.
#include "agent/storage/share_release.h"

#include "runtime/common/file_util.h"
#include "runtime/common/mount_table.h"

namespace capsule::agent::storage {
namespace {

// 2: "free reclaimable slab objects (includes dentries and inodes)", not
// the page cache (Documentation/admin-guide/sysctl/vm.rst).
constexpr const char* kDropCaches = "/proc/sys/vm/drop_caches";
constexpr const char* kDropDentriesAndInodes = "2";

}  // namespace

Status ReleaseSharedSubtree(const std::string& dir) {
  Status first = UnmountTree(dir);
  if (Status st = WriteFile(kDropCaches, kDropDentriesAndInodes); !st.ok() && first.ok())
    first = std::move(st).WithContext("evict the guest's cached inodes of " + dir);
  return first;
}

}  // namespace capsule::agent::storage
