// capset(2) with _LINUX_CAPABILITY_VERSION_3 (two 32-bit words per set) and
// PR_CAP_AMBIENT; ambient caps must be in permitted and inheritable.
#include "agent/engine/capabilities.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "runtime/common/file_util.h"

namespace capsule::engine {
namespace {

uint64_t Mask(const std::vector<int>& caps, int last_cap) {
  uint64_t m = 0;
  for (int c : caps) {
    if (c >= 0 && c <= last_cap && c < 64) m |= uint64_t{1} << c;
  }
  return m;
}

}  // namespace

int ReadLastCap() {
  auto text = ReadFile("/proc/sys/kernel/cap_last_cap");
  if (text.ok()) {
    try {
      return std::stoi(*text);
    } catch (...) {
    }
  }
  return CAP_LAST_CAP;
}

CapabilityPlan PlanCapabilities(const std::optional<oci::Capabilities>& caps, int last_cap) {
  CapabilityPlan p;
  p.last_cap = last_cap;
  if (!caps) return p;
  p.apply = true;
  p.bounding = Mask(caps->bounding, last_cap);
  p.effective = Mask(caps->effective, last_cap);
  p.permitted = Mask(caps->permitted, last_cap);
  p.inheritable = Mask(caps->inheritable, last_cap);
  p.ambient = Mask(caps->ambient, last_cap);
  return p;
}

Status DropBoundingSet(const CapabilityPlan& plan) {
  if (!plan.apply) return Status::Ok();
  for (int c = 0; c <= plan.last_cap; ++c) {
    if (plan.bounding & (uint64_t{1} << c)) continue;
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
      return ErrnoStatus("prctl(PR_CAPBSET_DROP, " + std::to_string(c) + ")");
  }
  return Status::Ok();
}

Status ApplyCapabilities(const CapabilityPlan& plan) {
  if (!plan.apply) return Status::Ok();
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (int i = 0; i < 2; ++i) {
    data[i].effective = static_cast<uint32_t>(plan.effective >> (32 * i));
    data[i].permitted = static_cast<uint32_t>(plan.permitted >> (32 * i));
    data[i].inheritable = static_cast<uint32_t>(plan.inheritable >> (32 * i));
  }
  if (::syscall(SYS_capset, &header, data) != 0) return ErrnoStatus("capset");
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return ErrnoStatus("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  for (int c = 0; c <= plan.last_cap; ++c) {
    if (!(plan.ambient & (uint64_t{1} << c))) continue;
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) != 0)
      return ErrnoStatus("raise ambient capability " + std::to_string(c));
  }
  return Status::Ok();
}

}  // namespace capsule::engine
