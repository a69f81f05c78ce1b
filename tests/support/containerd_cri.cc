// See containerd_cri.h. containerd 1.6 config version 2 keys; CNI spec 1.0.0
// with Debian's bridge, host-local and loopback plugins.
#include "tests/support/containerd_cri.h"

#include <fmt/format.h>

#include <cstdint>
#include <random>

namespace capsule::testing {
namespace {

constexpr const char* kCriTable = "plugins.\"io.containerd.grpc.v1.cri\"";

std::string RenderRuntime(const CriRuntime& r) {
  const std::string table = fmt::format("{}.containerd.runtimes.{}", kCriTable, r.name);
  std::string out = fmt::format("    [{}]\n      runtime_type = {}\n", table, TomlQuote(r.type));
  if (!r.options.empty()) {
    out += fmt::format("      [{}.options]\n", table);
    for (const auto& [key, value] : r.options) out += fmt::format("        {} = {}\n", key, TomlQuote(value));
  }
  return out;
}

}  // namespace

std::string TomlQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string RenderCriToml(const CriOptions& cri, const std::string& cni_conf_dir) {
  std::string out = fmt::format(R"([{0}]
  sandbox_image = {1}
  # Root here lacks CAP_SYS_RESOURCE: never ask for a negative oom_score_adj.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{0}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{0}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{0}.containerd.runtimes.runc.options]
        # cgroups v1 and PID 1 is not systemd on these hosts.
        SystemdCgroup = false
)",
                                kCriTable, TomlQuote(cri.sandbox_image));
  for (const auto& r : cri.runtimes) out += RenderRuntime(r);
  out += fmt::format("  [{}.cni]\n    bin_dir = {}\n    conf_dir = {}\n", kCriTable, TomlQuote(cri.cni_bin_dir),
                     TomlQuote(cni_conf_dir));
  return out;
}

CniNetwork RandomCniNetwork() {
  std::random_device rd;
  const uint32_t r = rd();
  const uint32_t second = 200 + (r >> 24) % 8;  // 10.200.0.0/13 spans 10.200-10.207
  const uint32_t third = (r >> 8) & 0xff;
  CniNetwork net;
  net.bridge = fmt::format("capbr{:06x}", r & 0xffffff);
  net.subnet = fmt::format("10.{}.{}.0/24", second, third);
  net.gateway = fmt::format("10.{}.{}.1", second, third);
  return net;
}

std::string RenderCniConflist(const CniNetwork& net, const std::string& ipam_data_dir) {
  return fmt::format(R"({{
  "cniVersion": "1.0.0",
  "name": "capsule-test",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{0}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{1}",
        "ranges": [[{{"subnet": "{2}", "gateway": "{3}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "loopback"}}
  ]
}}
)",
                     net.bridge, ipam_data_dir, net.subnet, net.gateway);
}

}  // namespace capsule::testing
