// libFuzzer target for the host-side reading of a container's OCI spec:
// MakeGuestSpec (root and mounts rewritten onto the VM's share), the limits
// it implies (LimitsFromSpec) and the CRI sandbox annotations
// (LimitsFromAnnotations), each then sized (SizeVm). Never a crash or UB;
// every bind stays one plain component under "<id>/mounts/"; a VM's size
// stays within the config's bounds.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "runtime/common/json_field.h"
#include "runtime/config/config.h"
#include "shim/pod/vm_sizing.h"
#include "shim/task/guest_spec.h"

namespace {

using namespace capsule::shim::task;
using namespace capsule::shim::pod;

void CheckSize(const VmSize& s, const capsule::config::GuestConfig& g) {
  if (s.vcpus < 1 || s.vcpus > g.max_vcpus) __builtin_trap();
  if (s.memory_mib < 1 || s.memory_mib > g.max_memory_mib) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = capsule::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!json.ok()) return 0;
  const capsule::config::GuestConfig guest;

  GuestSpecInput in;
  in.container_id = "c1";
  in.rootfs_rel = "c1/rootfs";
  in.guest_path = [](std::string_view rel) { return "/run/capsule/shared/" + std::string(rel); };
  auto gs = MakeGuestSpec(*json, in);
  if (gs.ok()) {
    if (gs->spec["root"]["path"] != "/run/capsule/shared/c1/rootfs") __builtin_trap();
    for (const ShareBind& b : gs->binds) {
      const std::string prefix = "c1/mounts/";
      if (b.rel.rfind(prefix, 0) != 0) __builtin_trap();
      const std::string name = b.rel.substr(prefix.size());
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") __builtin_trap();
      if (b.host_source.empty() || b.host_source[0] != '/') __builtin_trap();
    }
  }
  if (json->is_object()) {
    CheckSize(SizeVm(LimitsFromSpec(*json), guest), guest);
    auto a = json->find("annotations");
    if (a != json->end() && a->is_object()) {
      std::map<std::string, std::string> annotations;
      for (auto it = a->begin(); it != a->end(); ++it)
        if (it.value().is_string()) annotations[it.key()] = it.value().get<std::string>();
      auto limits = LimitsFromAnnotations(annotations);
      if (limits.ok()) CheckSize(SizeVm(*limits, guest), guest);
    }
  }
  return 0;
}
