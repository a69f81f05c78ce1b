// See guest_spec.h. Each section of the spec has its own small rewrite.
#include "shim/task/guest_spec.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

#include "runtime/wire/guest_abi.h"
#include "shim/task/process_limits.h"

namespace capsule::shim::task {
namespace {

using nlohmann::json;

bool HasOption(const json& mount, std::string_view word) {
  if (!mount.contains("options") || !mount["options"].is_array()) return false;
  for (const auto& o : mount["options"]) {
    if (o.is_string() && o.get<std::string>() == word) return true;
  }
  return false;
}

// obj[key] when it is a string, else "" (json::value() would throw).
std::string StringOr(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsBind(const json& mount) {
  const std::string type = mount.value("type", "");
  return type == "bind" || HasOption(mount, "bind") || HasOption(mount, "rbind");
}

// A file name safe as one path component, for readable share paths.
std::string Component(std::string_view path) {
  std::string base(path.substr(path.find_last_of('/') + 1));
  for (char& c : base) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (base.empty() || base == "." || base == "..") base = "root";
  return base;
}

bool UnderPseudoFs(const std::string& path) {
  for (std::string_view p : {"/proc", "/sys", "/dev"}) {
    if (path == p || path.rfind(std::string(p) + "/", 0) == 0) return true;
  }
  return false;
}

// Rewrites mounts[i] (a bind) or returns false to drop it; notes say why.
Result<bool> RewriteBind(json& m, size_t i, const GuestSpecInput& in, GuestSpec& out) {
  const std::string field = fmt::format("mounts[{}]", i);
  const std::string dest = m.value("destination", "");
  const std::string source = m.value("source", "");
  if (dest == kDevShm) {
    // The sandbox's host /dev/shm (a tmpfs containerd mounted, or the host's
    // own /dev/shm with host IPC) cannot be shared with a guest.
    m["source"] = std::string(guest_abi::kPodShmGuestPath);
    out.notes.push_back(fmt::format("{}: /dev/shm from host {} becomes the pod's guest tmpfs {}", field, source,
                                    guest_abi::kPodShmGuestPath));
    return true;
  }
  if (source.empty() || source[0] != '/')
    return InvalidArgument(fmt::format("{}.source '{}' must be an absolute host path", field, source));
  struct stat st{};
  if (::stat(source.c_str(), &st) != 0)
    return InvalidArgument(fmt::format("{}.source {} (for {}): {}", field, source, dest, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    out.notes.push_back(fmt::format("{}: dropped bind of {} on {}: a device, socket or FIFO cannot cross virtio-fs",
                                    field, source, dest));
    return false;
  }
  if (UnderPseudoFs(source)) {
    out.notes.push_back(
        fmt::format("{}: dropped bind of host {} on {}: host /proc, /sys and /dev do not describe the guest", field,
                    source, dest));
    return false;
  }
  // Bidirectional propagation (CRI's PROPAGATION_BIDIRECTIONAL, OCI
  // "shared"/"rshared" on a bind) means mounts the container makes reach the
  // host. Those mounts are made in the guest's kernel and can never cross
  // the VM, so the container is refused instead of silently running with
  // one-way propagation (host -> container, "rslave", does work).
  for (const char* shared : {"shared", "rshared"}) {
    if (HasOption(m, shared))
      return InvalidArgument(fmt::format(
          "{} ({} on {}): bidirectional mount propagation ('{}') cannot cross the pod's VM: mounts the container makes "
          "stay in the guest; use HostToContainer ('rslave')",
          field, source, dest, shared));
  }
  ShareBind bind;
  bind.host_source = source;
  bind.rel = fmt::format("{}/mounts/{}-{}", in.container_id, i, Component(dest));
  bind.directory = S_ISDIR(st.st_mode);
  if (m.contains("options") && m["options"].is_array()) {
    for (const auto& o : m["options"])
      if (o.is_string()) bind.options.push_back(o.get<std::string>());
  }
  m["source"] = in.guest_path(bind.rel);
  out.binds.push_back(std::move(bind));
  return true;
}

Status RewriteMounts(json& spec, const GuestSpecInput& in, GuestSpec& out) {
  if (!spec.contains("mounts")) return Status::Ok();
  if (!spec["mounts"].is_array()) return InvalidArgument("mounts: must be an array");
  json kept = json::array();
  for (size_t i = 0; i < spec["mounts"].size(); ++i) {
    json m = spec["mounts"][i];
    if (!m.is_object()) return InvalidArgument(fmt::format("mounts[{}]: must be an object", i));
    // json::value() throws on a present key of another type.
    for (const char* key : {"destination", "source", "type"}) {
      if (m.contains(key) && !m[key].is_string())
        return InvalidArgument(fmt::format("mounts[{}].{}: must be a string", i, key));
    }
    bool keep = true;
    if (IsBind(m)) {
      ASSIGN_OR_RETURN(keep, RewriteBind(m, i, in, out));
    }
    if (keep) kept.push_back(std::move(m));
  }
  spec["mounts"] = std::move(kept);
  return Status::Ok();
}

// The VM is the pod's network boundary, and namespace paths name host
// processes (the VMM): the agent joins pod namespaces itself.
void RewriteNamespaces(json& spec, GuestSpec& out) {
  if (!spec.contains("linux") || !spec["linux"].is_object()) return;
  json& linux = spec["linux"];
  if (!linux.contains("namespaces") || !linux["namespaces"].is_array()) return;
  json kept = json::array();
  for (json ns : linux["namespaces"]) {
    const std::string type = StringOr(ns, "type");
    const std::string path = StringOr(ns, "path");
    if (type == "network") {
      if (!path.empty()) out.notes.push_back("network namespace " + path + ": the VM's network is the pod's");
      continue;
    }
    if (!path.empty()) {
      out.notes.push_back(fmt::format("{} namespace {}: a host path; the agent joins the pod's own", type, path));
      ns.erase("path");
    }
    kept.push_back(std::move(ns));
  }
  linux["namespaces"] = std::move(kept);
}

void DropHooks(json& spec, GuestSpec& out) {
  if (!spec.contains("hooks")) return;
  if (!spec["hooks"].empty()) out.notes.push_back("hooks: dropped, they name host programs the guest does not have");
  spec.erase("hooks");
}

}  // namespace

Result<GuestSpec> MakeGuestSpec(const json& host_spec, const GuestSpecInput& input) {
  if (!host_spec.is_object()) return InvalidArgument("config.json: must be a JSON object");
  if (!host_spec.contains("root") || !host_spec["root"].is_object())
    return InvalidArgument("root: required");
  if (host_spec.contains("process")) RETURN_IF_ERROR(CheckProcessLimits(host_spec["process"], "process"));
  GuestSpec out;
  out.spec = host_spec;
  out.spec["root"]["path"] = input.guest_path(input.rootfs_rel);
  RETURN_IF_ERROR(RewriteMounts(out.spec, input, out));
  RewriteNamespaces(out.spec, out);
  DropHooks(out.spec, out);
  return out;
}

}  // namespace capsule::shim::task
