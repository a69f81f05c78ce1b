// The "linux" object: namespaces, resources (also parsed standalone for
// updates), devices, sysctl, masked/readonly paths, propagation, cgroupsPath.
#include <array>
#include <set>
#include <string_view>

#include "runtime/common/json_field.h"
#include "runtime/oci/parse_internal.h"

namespace capsule::oci::internal {
namespace {

struct NamespaceName {
  std::string_view name;
  NamespaceType type;
};

constexpr std::array<NamespaceName, 8> kNamespaceNames = {{
    {"pid", NamespaceType::kPid},
    {"network", NamespaceType::kNetwork},
    {"mount", NamespaceType::kMount},
    {"ipc", NamespaceType::kIpc},
    {"uts", NamespaceType::kUts},
    {"user", NamespaceType::kUser},
    {"cgroup", NamespaceType::kCgroup},
    {"time", NamespaceType::kTime},
}};

Status ParseNamespaces(const JsonField& f, std::vector<Namespace>* out) {
  std::set<NamespaceType> seen;
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    std::string name;
    RETURN_IF_ERROR(Required(e, "type", &name));
    const NamespaceName* found = nullptr;
    for (const auto& n : kNamespaceNames) {
      if (n.name == name) found = &n;
    }
    if (found == nullptr) return e["type"].Error("unknown namespace type \"" + name + "\"");
    if (!seen.insert(found->type).second) return e["type"].Error("duplicate namespace \"" + name + "\"");
    Namespace ns;
    ns.type = found->type;
    RETURN_IF_ERROR(Optional(e, "path", &ns.path));
    if (!ns.path.empty() && ns.path[0] != '/')
      return e["path"].Error("must be an absolute path, got \"" + ns.path + "\"");
    out->push_back(std::move(ns));
    return Status::Ok();
  });
}

Status ParseCpu(const JsonField& f, std::optional<LinuxCpu>* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  LinuxCpu c;
  RETURN_IF_ERROR(Optional(f, "shares", &c.shares));
  RETURN_IF_ERROR(Optional(f, "quota", &c.quota));
  RETURN_IF_ERROR(Optional(f, "period", &c.period));
  RETURN_IF_ERROR(Optional(f, "realtimeRuntime", &c.realtime_runtime));
  RETURN_IF_ERROR(Optional(f, "realtimePeriod", &c.realtime_period));
  RETURN_IF_ERROR(Optional(f, "burst", &c.burst));
  RETURN_IF_ERROR(Optional(f, "idle", &c.idle));
  RETURN_IF_ERROR(Optional(f, "cpus", &c.cpus));
  RETURN_IF_ERROR(Optional(f, "mems", &c.mems));
  *out = std::move(c);
  return Status::Ok();
}

Status ParseMemory(const JsonField& f, std::optional<LinuxMemory>* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  LinuxMemory m;
  RETURN_IF_ERROR(Optional(f, "limit", &m.limit));
  RETURN_IF_ERROR(Optional(f, "reservation", &m.reservation));
  RETURN_IF_ERROR(Optional(f, "swap", &m.swap));
  RETURN_IF_ERROR(Optional(f, "kernel", &m.kernel));
  RETURN_IF_ERROR(Optional(f, "kernelTCP", &m.kernel_tcp));
  RETURN_IF_ERROR(Optional(f, "swappiness", &m.swappiness));
  if (m.swappiness && *m.swappiness > 100) return f["swappiness"].Error("must be between 0 and 100");
  RETURN_IF_ERROR(Optional(f, "disableOOMKiller", &m.disable_oom_killer));
  RETURN_IF_ERROR(Optional(f, "useHierarchy", &m.use_hierarchy));
  RETURN_IF_ERROR(Optional(f, "checkBeforeUpdate", &m.check_before_update));
  *out = std::move(m);
  return Status::Ok();
}

Status ParseThrottle(const JsonField& f, std::vector<LinuxThrottleDevice>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    LinuxThrottleDevice d;
    RETURN_IF_ERROR(Required(e, "major", &d.major));
    RETURN_IF_ERROR(Required(e, "minor", &d.minor));
    RETURN_IF_ERROR(Required(e, "rate", &d.rate));
    out->push_back(d);
    return Status::Ok();
  });
}

Status ParseWeightDevices(const JsonField& f, std::vector<LinuxWeightDevice>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    LinuxWeightDevice d;
    RETURN_IF_ERROR(Required(e, "major", &d.major));
    RETURN_IF_ERROR(Required(e, "minor", &d.minor));
    RETURN_IF_ERROR(Optional(e, "weight", &d.weight));
    RETURN_IF_ERROR(Optional(e, "leafWeight", &d.leaf_weight));
    out->push_back(d);
    return Status::Ok();
  });
}

Status ParseHugepageLimits(const JsonField& f, std::vector<LinuxHugepageLimit>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    LinuxHugepageLimit h;
    RETURN_IF_ERROR(Required(e, "pageSize", &h.page_size));
    RETURN_IF_ERROR(Required(e, "limit", &h.limit));
    out->push_back(std::move(h));
    return Status::Ok();
  });
}

Status ParseBlockIO(const JsonField& f, std::optional<LinuxBlockIO>* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  LinuxBlockIO b;
  RETURN_IF_ERROR(Optional(f, "weight", &b.weight));
  RETURN_IF_ERROR(Optional(f, "leafWeight", &b.leaf_weight));
  RETURN_IF_ERROR(ParseWeightDevices(f["weightDevice"], &b.weight_device));
  RETURN_IF_ERROR(ParseThrottle(f["throttleReadBpsDevice"], &b.throttle_read_bps_device));
  RETURN_IF_ERROR(ParseThrottle(f["throttleWriteBpsDevice"], &b.throttle_write_bps_device));
  RETURN_IF_ERROR(ParseThrottle(f["throttleReadIOPSDevice"], &b.throttle_read_iops_device));
  RETURN_IF_ERROR(ParseThrottle(f["throttleWriteIOPSDevice"], &b.throttle_write_iops_device));
  *out = std::move(b);
  return Status::Ok();
}

Status ParseDeviceRules(const JsonField& f, std::vector<LinuxDeviceCgroup>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    LinuxDeviceCgroup d;
    RETURN_IF_ERROR(Required(e, "allow", &d.allow));
    RETURN_IF_ERROR(Optional(e, "type", &d.type));
    if (!d.type.empty() && d.type != "a" && d.type != "c" && d.type != "b")
      return e["type"].Error("must be \"a\", \"c\" or \"b\", got \"" + d.type + "\"");
    RETURN_IF_ERROR(Optional(e, "major", &d.major));
    RETURN_IF_ERROR(Optional(e, "minor", &d.minor));
    RETURN_IF_ERROR(Optional(e, "access", &d.access));
    if (d.access.find_first_not_of("rwm") != std::string::npos)
      return e["access"].Error("must only contain r, w and m, got \"" + d.access + "\"");
    out->push_back(std::move(d));
    return Status::Ok();
  });
}

Status ParseDevices(const JsonField& f, std::vector<LinuxDevice>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    LinuxDevice d;
    RETURN_IF_ERROR(Required(e, "path", &d.path));
    if (d.path.empty() || d.path[0] != '/') return e["path"].Error("must be an absolute path");
    RETURN_IF_ERROR(Required(e, "type", &d.type));
    if (d.type != "c" && d.type != "b" && d.type != "u" && d.type != "p")
      return e["type"].Error("must be one of c, b, u, p; got \"" + d.type + "\"");
    if (d.type != "p") {
      RETURN_IF_ERROR(Required(e, "major", &d.major));
      RETURN_IF_ERROR(Required(e, "minor", &d.minor));
    }
    RETURN_IF_ERROR(Optional(e, "fileMode", &d.file_mode));
    RETURN_IF_ERROR(Optional(e, "uid", &d.uid));
    RETURN_IF_ERROR(Optional(e, "gid", &d.gid));
    out->push_back(std::move(d));
    return Status::Ok();
  });
}

}  // namespace

Status ParseResources(const JsonField& f, LinuxResources* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(ParseDeviceRules(f["devices"], &out->devices));
  RETURN_IF_ERROR(ParseMemory(f["memory"], &out->memory));
  RETURN_IF_ERROR(ParseCpu(f["cpu"], &out->cpu));
  if (!f["pids"].null()) {
    RETURN_IF_ERROR(f["pids"].ExpectObject());
    LinuxPids p;
    RETURN_IF_ERROR(Required(f["pids"], "limit", &p.limit));
    out->pids = p;
  }
  RETURN_IF_ERROR(ParseBlockIO(f["blockIO"], &out->block_io));
  RETURN_IF_ERROR(ParseHugepageLimits(f["hugepageLimits"], &out->hugepage_limits));
  return Optional(f, "unified", &out->unified);
}

Status ParseLinux(const JsonField& f, Linux* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(ParseNamespaces(f["namespaces"], &out->namespaces));
  if (!f["resources"].null()) {
    LinuxResources r;
    RETURN_IF_ERROR(ParseResources(f["resources"], &r));
    out->resources = std::move(r);
  }
  RETURN_IF_ERROR(Optional(f, "cgroupsPath", &out->cgroups_path));
  RETURN_IF_ERROR(ParseDevices(f["devices"], &out->devices));
  RETURN_IF_ERROR(Optional(f, "sysctl", &out->sysctl));
  RETURN_IF_ERROR(Optional(f, "maskedPaths", &out->masked_paths));
  RETURN_IF_ERROR(Optional(f, "readonlyPaths", &out->readonly_paths));
  RETURN_IF_ERROR(Optional(f, "rootfsPropagation", &out->rootfs_propagation));
  static const std::set<std::string> kPropagations = {"", "shared", "rshared", "slave", "rslave",
                                                      "private", "rprivate", "unbindable", "runbindable"};
  if (!kPropagations.count(out->rootfs_propagation))
    return f["rootfsPropagation"].Error("unknown propagation \"" + out->rootfs_propagation + "\"");
  if (!f["seccomp"].null()) {
    Seccomp s;
    RETURN_IF_ERROR(ParseSeccomp(f["seccomp"], &s));
    out->seccomp = std::move(s);
  }
  RETURN_IF_ERROR(Optional(f, "mountLabel", &out->mount_label));
  out->has_uid_mappings = !f["uidMappings"].null() || !f["gidMappings"].null();
  return Status::Ok();
}

}  // namespace capsule::oci::internal
