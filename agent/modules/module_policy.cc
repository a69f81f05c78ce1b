// See module_policy.h.
#include "agent/modules/module_policy.h"

#include <fnmatch.h>

#include <algorithm>

#include "agent/modules/module_index.h"
#include "runtime/common/file_util.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::modules {
namespace {

// What pods use: iptables/nftables and conntrack (kube-proxy, CNI plugins,
// service meshes' init containers), bridges, veths and tunnels (CNI in a
// pod, Docker-in-a-pod), IPVS (kube-proxy's ipvs mode), tc (bandwidth
// plugin, Cilium, Calico), tun and WireGuard (VPN sidecars), overlay.
constexpr const char* kDefaultPatterns[] = {
    // netfilter
    "nf_*", "nft_*", "nfnetlink*", "x_tables", "xt_*", "ip_tables", "ip6_tables", "iptable_*", "ip6table_*",
    "ipt_*", "ip6t_*", "ebtables", "ebtable_*", "ebt_*", "arp_tables", "arptable_*", "arpt_*", "ip_set*",
    "br_netfilter", "ip_vs*",
    // links and tunnels
    "bridge", "stp", "llc", "veth", "vxlan", "geneve", "macvlan", "ipvlan", "dummy", "ifb", "vrf", "8021q",
    "tun", "wireguard", "ipip", "ip_gre", "gre", "ip_tunnel", "tunnel4", "tunnel6", "ip6_tunnel", "sit",
    "udp_tunnel", "ip6_udp_tunnel",
    // traffic control
    "sch_*", "cls_*", "act_*",
    // filesystems and what the above ask for by softdep
    "overlay", "libcrc32c", "crc32c*",
};

}  // namespace

ModulePolicy::ModulePolicy(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}

ModulePolicy ModulePolicy::Default() { return WithExtra({}); }

ModulePolicy ModulePolicy::WithExtra(const std::vector<std::string>& extra) {
  std::vector<std::string> patterns(std::begin(kDefaultPatterns), std::end(kDefaultPatterns));
  for (const auto& p : extra) {
    if (guest_abi::IsValidModulePattern(p)) patterns.push_back(NormalizeModuleName(p));
  }
  return ModulePolicy(std::move(patterns));
}

ModulePolicy ModulePolicy::FromText(std::string_view text) {
  std::vector<std::string> patterns;
  for (const std::string& line : ModuleFileLines(text)) {
    if (guest_abi::IsValidModulePattern(line)) patterns.push_back(NormalizeModuleName(line));
  }
  return ModulePolicy(std::move(patterns));
}

bool ModulePolicy::Allows(std::string_view module) const {
  const std::string name = NormalizeModuleName(module);
  return std::any_of(patterns_.begin(), patterns_.end(),
                     [&](const std::string& p) { return ::fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

std::string ModulePolicy::ToText() const {
  std::string text = "# modules the guest kernel may load on demand (capsule-agent at boot)\n";
  for (const auto& p : patterns_) text += p + "\n";
  return text;
}

Status WriteModulePolicy(const ModulePolicy& policy, const std::string& path) {
  // At boot nothing has made /run/capsule yet (it is a fresh tmpfs).
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0)
    RETURN_IF_ERROR_CTX(MkdirAll(path.substr(0, slash), 0755), "module allowlist " + path);
  return WriteFileAtomic(path, policy.ToText(), 0644).WithContext("module allowlist " + path);
}

ModulePolicy ReadModulePolicy(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return ModulePolicy::Default();
  return ModulePolicy::FromText(*text);
}

}  // namespace capsule::agent::modules
