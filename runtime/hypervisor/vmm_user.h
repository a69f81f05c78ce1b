// The unprivileged identity a QEMU runs as (Firecracker's jailer does the
// same): a uid of its own per VM, with a gid of the same number, taken from
// hypervisor.vmm_uid_base .. + vmm_uid_count. A uid is taken by an flock on
// <state_dir>/vmm-uids/<uid>.lock whose fd QEMU itself inherits and holds,
// so the uid is free again the moment that QEMU exits, whoever owned the VM
// then (the pool, a shim, nobody); and since a compromised QEMU can close
// that fd, a uid is handed out only while no process runs as it. Two QEMUs
// never share a uid, so one cannot signal, ptrace or read /proc of another. /dev/kvm's group is added
// so KVM works without capabilities.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"

namespace capsule::hypervisor {

struct VmmUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary: /dev/kvm's group when there is one
  UniqueFd lock;              // for QEMU to inherit (keep_fds)
};

// Whether QEMUs launched by this process run as a VmmUser: the range is set
// (hypervisor.vmm_uid_base) and we may change uid (CAP_SETUID and
// CAP_SETGID, i.e. root).
bool VmmUsersEnabled(const config::Config& config);

// FAILED_PRECONDITION naming `key`, the path and the directory in the way
// unless a user with no relation to the file may read it (`exec`: and run
// it): what a VMM uid needs of the kernel, initrd, firmware and QEMU.
Status CheckVmmCanRead(const std::string& path, std::string_view key, bool exec = false);

// A free uid of the range (unlocked, and no process runs as it), preferring
// one derived from `vm_id`. RESOURCE_EXHAUSTED when every uid of the range
// is held.
Result<VmmUser> AcquireVmmUser(const config::Config& config, const std::string& vm_id);

}  // namespace capsule::hypervisor
