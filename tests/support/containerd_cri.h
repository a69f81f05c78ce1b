// CRI and CNI configuration for ContainerdHarness on this host: the CRI
// plugin's TOML (local pause image, cgroupfs, restrict_oom_score_adj, a
// loopback stream server, runtime handlers) and a CNI bridge conflist on a
// bridge and /24 of the harness's own. Pure text rendering; the harness
// writes the files and owns the clean-up (see HOST-NOTES, CRI quirks).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace capsule::testing {

// One CRI runtime handler, rendered as
// [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.<name>].
struct CriRuntime {
  std::string name;  // the handler name pods ask for, e.g. "capsule"
  std::string type;  // runtime_type, e.g. "io.containerd.capsule.v2"
  // The handler's .options table; values are strings (TOML-quoted here),
  // e.g. {"ConfigPath", "/etc/capsule/config.yaml"}.
  std::vector<std::pair<std::string, std::string>> options;
};

// Turns the CRI plugin on in ContainerdOptions::cri. runc stays the default
// handler (runtime_type io.containerd.runc.v2, SystemdCgroup = false).
struct CriOptions {
  // Must be imported before a pod starts (ContainerdHarness::ImportImage).
  std::string sandbox_image = "capsule.test/pause:latest";
  std::vector<CriRuntime> runtimes;
  // Writes a conflist so POD-network pods get a netns with a veth on a
  // bridge of this harness's own (random name capbrXXXXXX and /24 in
  // 10.200.0.0/13, so parallel tests do not collide); isGateway so the host
  // reaches pod IPs; no masquerade, no iptables or ip_forward changes.
  // Without it the CNI conf dir stays empty and only host-network pods run.
  bool cni = false;
  std::string cni_bin_dir = "/usr/lib/cni";  // Debian's containernetworking-plugins
};

// The network the harness's CNI config gives pods.
struct CniNetwork {
  std::string bridge;   // host bridge interface, e.g. "capbr3fa2c1"
  std::string subnet;   // "10.203.17.0/24"
  std::string gateway;  // the bridge's address, "10.203.17.1"
};

// A TOML basic string: quoted, with '"' and '\' escaped.
std::string TomlQuote(const std::string& s);

// The [plugins."io.containerd.grpc.v1.cri"] tables; `cni_conf_dir` is where
// the conflist lives (empty dir when CNI is off).
std::string RenderCriToml(const CriOptions& cri, const std::string& cni_conf_dir);

// A fresh random bridge name and /24 in 10.200.0.0/13.
CniNetwork RandomCniNetwork();

// bridge (host-local IPAM keeping its leases in `ipam_data_dir`) + loopback.
std::string RenderCniConflist(const CniNetwork& net, const std::string& ipam_data_dir);

}  // namespace capsule::testing
