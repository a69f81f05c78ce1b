// See host_namespaces.h.
#include "shim/pod/host_namespaces.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/common/reasons.h"
#include "shim/pod/pod_network.h"

namespace capsule::shim::pod {
namespace {

struct HostNamespace {
  const char* oci_type;   // linux.namespaces[].type
  const char* pod_field;  // the Kubernetes PodSpec field that drops it
};
constexpr HostNamespace kHostNamespaces[] = {
    {"network", "hostNetwork"}, {"pid", "hostPID"}, {"ipc", "hostIPC"}};

bool HasNamespace(const nlohmann::json& namespaces, std::string_view type) {
  for (const auto& ns : namespaces) {
    if (ns.is_object() && ns.value("type", "") == type) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> HostNamespacesAskedFor(const nlohmann::json& sandbox_spec) {
  static const nlohmann::json kNone = nlohmann::json::array();
  const nlohmann::json* namespaces = &kNone;
  if (auto linux = sandbox_spec.find("linux"); linux != sandbox_spec.end() && linux->is_object()) {
    if (auto n = linux->find("namespaces"); n != linux->end() && n->is_array()) namespaces = &*n;
  }
  std::vector<std::string> out;
  for (const auto& h : kHostNamespaces) {
    if (!HasNamespace(*namespaces, h.oci_type)) out.emplace_back(h.pod_field);
  }
  return out;
}

Status RefuseHostNetns(const std::string& netns_path) {
  struct stat pod{};
  if (netns_path.empty() || ::stat(netns_path.c_str(), &pod) != 0) return Status::Ok();  // Attach names it
  for (const char* host : {"/proc/1/ns/net", "/proc/self/ns/net"}) {
    struct stat h{};
    if (::stat(host, &h) == 0 && h.st_dev == pod.st_dev && h.st_ino == pod.st_ino)
      return InvalidArgument(fmt::format("network namespace {} is the host's own ({}): a pod VM's NIC cannot take "
                                         "over the node's network; run this pod with a runc RuntimeClass instead",
                                         netns_path, host))
          .WithReason(reason::kHostNamespaceRefused);
  }
  return Status::Ok();
}

Status RefuseHostNamespaces(const nlohmann::json& sandbox_spec, std::string_view sandbox_id) {
  if (Status st = RefuseHostNetns(PodNetnsPath(sandbox_spec)); !st.ok())
    return std::move(st).WithContext(fmt::format("pod sandbox {} (hostNetwork: true)", sandbox_id));
  const std::vector<std::string> asked = HostNamespacesAskedFor(sandbox_spec);
  if (asked.empty()) return Status::Ok();
  std::string fields;
  for (const auto& f : asked) fields += (fields.empty() ? "" : ", ") + f + ": true";
  return InvalidArgument(fmt::format(
      "pod sandbox {} asks to share the node's namespaces ({}): the capsule runtime runs each pod in its own "
      "VM with its own kernel, which cannot share the host's network, process or IPC namespace; run this pod "
      "with a runc RuntimeClass instead",
      sandbox_id, fields)).WithReason(reason::kHostNamespaceRefused);
}

}  // namespace capsule::shim::pod
