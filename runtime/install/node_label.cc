// See node_label.h.
#include "runtime/install/node_label.h"

#include <nlohmann/json.hpp>

namespace capsule::install {
namespace {

constexpr size_t kMaxNodeNameChars = 253;  // DNS-1123 subdomain, k8s.io/apimachinery validation

bool LowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string Patch(nlohmann::json value) {
  nlohmann::json patch;
  patch["metadata"]["labels"][kRuntimeLabel] = std::move(value);
  return patch.dump();
}

// `what` names the action and the node; it is printed only once the name
// is known to be valid (the validation error shows a bad one escaped).
Status PatchNode(const KubeApiOptions& opts, const std::string& node, const std::string& patch,
                 const std::string& what) {
  RETURN_IF_ERROR(ValidateNodeName(node));
  auto api = KubeApi::Create(opts);
  if (!api.ok()) return std::move(api).status().WithContext(what);
  RETURN_IF_ERROR_CTX(api->MergePatch("/api/v1/nodes/" + node, patch), what);
  return Status::Ok();
}

}  // namespace

Status ValidateNodeName(std::string_view name) {
  auto bad = [&](std::string_view why) {
    std::string shown;
    for (char c : name.substr(0, 80)) shown.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    if (name.size() > 80) shown += "...";
    return InvalidArgument("node name \"" + shown + "\" is not a DNS-1123 subdomain: " + std::string(why));
  };
  if (name.empty()) return bad("empty");
  if (name.size() > kMaxNodeNameChars) return bad("over 253 characters");
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string_view part = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    if (part.empty()) return bad("empty part between dots");
    if (!LowerAlnum(part.front()) || !LowerAlnum(part.back())) return bad("each part starts and ends with [a-z0-9]");
    for (char c : part) {
      if (!LowerAlnum(c) && c != '-') return bad("only [a-z0-9.-] are allowed");
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return Status::Ok();
}

std::string LabelPatch() { return Patch("true"); }
std::string UnlabelPatch() { return Patch(nullptr); }

Status LabelNode(const KubeApiOptions& api, const std::string& node) {
  return PatchNode(api, node, LabelPatch(), "label node \"" + node + "\" " + kRuntimeLabel + "=true");
}

Status UnlabelNode(const KubeApiOptions& api, const std::string& node) {
  return PatchNode(api, node, UnlabelPatch(),
                   "remove label " + std::string(kRuntimeLabel) + " from node \"" + node + "\"");
}

}  // namespace capsule::install
