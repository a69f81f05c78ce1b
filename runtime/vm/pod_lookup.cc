// Exact matches win over prefixes, so a full id is never ambiguous.
#include "runtime/vm/pod_lookup.h"

#include <string>

namespace capsule::vm {
namespace {

std::string Describe(const VmListing& l) {
  if (!l.pod->pod_name.empty()) return l.pod->pod_namespace + "/" + l.pod->pod_name + " (" + l.pod->sandbox_id + ")";
  return l.pod->sandbox_id;
}

}  // namespace

Result<VmListing> FindPod(const std::vector<VmListing>& vms, std::string_view query) {
  if (query.empty()) return InvalidArgument("pod: an empty name matches nothing");
  std::vector<const VmListing*> exact, prefix;
  for (const VmListing& l : vms) {
    if (!l.pod) continue;
    const PodRecord& p = *l.pod;
    const bool named = !p.pod_name.empty() && query == p.pod_namespace + "/" + p.pod_name;
    if (query == p.sandbox_id || query == l.id || named) {
      exact.push_back(&l);
    } else if (query.size() >= kMinPodPrefix && p.sandbox_id.compare(0, query.size(), query) == 0) {
      prefix.push_back(&l);
    }
  }
  const std::vector<const VmListing*>& found = exact.empty() ? prefix : exact;
  if (found.empty())
    return NotFound("pod \"" + std::string(query) + "\": no pod in a microVM on this host has that sandbox id" +
                    (query.size() < kMinPodPrefix ? "" : " (or prefix)") +
                    ", namespace/name or VM id (capsule-runtime ps lists them)");
  if (found.size() > 1) {
    std::string names;
    for (const VmListing* l : found) names += (names.empty() ? "" : ", ") + Describe(*l);
    return InvalidArgument("pod \"" + std::string(query) + "\" matches " + std::to_string(found.size()) +
                           " pods: " + names);
  }
  return *found.front();
}

}  // namespace capsule::vm
