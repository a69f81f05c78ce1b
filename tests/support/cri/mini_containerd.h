// MiniContainerd: a private containerd 1.6 for one test, with its own root,
// state, sockets and config under a temp dir, the CRI plugin set up for this
// host (cgroupfs, restrict_oom_score_adj, sandbox_image = the local pause
// image), optionally CNI (a bridge of its own with host-local IPAM and
// loopback, from Debian's containernetworking-plugins), and a leak check.
//
// Deliberately small and private to the shim/CRI-client tests: a shared
// containerd harness is being written in tests/support/containerd*; the two
// converge when branches merge.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"

namespace capsule::testing {

struct CommandOutput {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs argv to completion with stdout+stderr captured; DEADLINE_EXCEEDED
// (the child killed) after `timeout`.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

struct MiniContainerdOptions {
  std::string sandbox_image = "capsule.test/pause:latest";
  // Extra TOML appended to the generated config (e.g. a runtime for capsule).
  std::string extra_config;
  std::chrono::milliseconds boot_timeout{30000};
  // Directories put in front of containerd's PATH: where it looks for shim
  // binaries (containerd-shim-<name>-<version>) by runtime type.
  std::vector<std::string> path_prepend;
  // Writes a CNI conflist so pods in POD network mode get a netns with a
  // veth on a bridge of this containerd's own (a random name and /24 in
  // 10.200.0.0/13, so parallel tests do not collide), isGateway so the host
  // reaches pod IPs, no masquerade, no iptables changes.
  bool cni = false;
};

// The network MiniContainerd's CNI config gives pods.
struct CniNetwork {
  std::string bridge;   // host bridge interface, e.g. "capbr3fa2c1"
  std::string subnet;   // "10.203.17.0/24"
  std::string gateway;  // the bridge's address, "10.203.17.1"
};

class MiniContainerd {
 public:
  static Result<std::unique_ptr<MiniContainerd>> Start(MiniContainerdOptions options = {});
  // Stops containerd, then kills leftover shims and unmounts leftovers
  // under its dirs (the test should have asserted Leaks() is empty first).
  ~MiniContainerd();
  MiniContainerd(const MiniContainerd&) = delete;
  MiniContainerd& operator=(const MiniContainerd&) = delete;

  const std::string& address() const { return address_; }  // gRPC socket path
  const std::string& root() const { return root_; }
  const std::string& state() const { return state_; }
  const std::string& dir() const { return dir_.path(); }
  // Set when options.cni.
  const std::optional<CniNetwork>& cni() const { return cni_; }
  std::string log_path() const { return dir_.Join("containerd.log"); }

  // `ctr --address <ours> --namespace <ns> args...`; non-zero exit is an
  // error carrying the output.
  Result<std::string> Ctr(const std::vector<std::string>& args, const std::string& ns = "k8s.io",
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
  Status ImportImage(const std::string& tar, const std::string& ns = "k8s.io");

  // Stops containerd (SIGTERM) and boots it again on the same root, state
  // and config: it reloads (or cleans up after) the shims it had.
  Status Restart();

  // What this containerd left running or mounted: shim processes started
  // with our address, mounts under our directories, and with CNI: pod
  // network namespaces made since Start() and ports still on our bridge.
  // Empty when clean.
  std::vector<std::string> Leaks() const;

 private:
  explicit MiniContainerd(TempDir dir, MiniContainerdOptions options);
  Status WriteCniConfig();
  Status Boot();
  void Stop();
  void ReadLog(UniqueFd pipe);

  TempDir dir_;
  MiniContainerdOptions options_;
  std::optional<ChildProcess> child_;
  std::string address_, root_, state_;
  std::optional<CniNetwork> cni_;
  std::vector<std::string> netns_before_;  // /var/run/netns entries at Start()
  std::thread log_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool booted_ = false;  // guarded by mu_
  bool log_eof_ = false; // guarded by mu_
};

}  // namespace capsule::testing
