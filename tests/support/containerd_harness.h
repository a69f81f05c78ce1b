// ContainerdHarness: a private containerd 1.6 for integration tests. Its
// root, state, sockets, config and log all live in one temp dir; Start()
// returns once the gRPC and ttrpc sockets answer; the destructor stops the
// daemon, unmounts anything left below the dir and removes it, so a failing
// test leaves nothing behind. Extend it through ContainerdOptions (plugin
// sections, enabled plugins, environment) rather than by editing the file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "tests/support/command.h"

namespace capsule::testing {

// Plugins the harness disables unless told otherwise: CRI (needs CNI and
// images, see HOST-NOTES), snapshotters that cannot work here (btrfs, aufs,
// zfs, devmapper) and tracing. Each one only adds start-up noise here.
std::vector<std::string> DefaultDisabledPlugins();

struct ContainerdOptions {
  std::string containerd_binary = "/usr/bin/containerd";
  std::string ctr_binary = "/usr/bin/ctr";
  // Full plugin ids ("io.containerd.grpc.v1.cri"); remove one to enable it.
  std::vector<std::string> disabled_plugins = DefaultDisabledPlugins();
  // TOML appended to the generated config.toml, e.g. a
  // [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.capsule] table.
  // "@DIR@" is replaced by the harness's temp dir. The harness itself writes
  // the top-level keys, [grpc], [ttrpc], [debug] and
  // [plugins."io.containerd.internal.v1.opt"]; do not repeat those tables.
  std::vector<std::string> extra_toml;
  // Added to (or replacing in) the inherited environment of containerd, and
  // so of the shims it starts (e.g. PATH with the shim's directory).
  std::vector<std::pair<std::string, std::string>> env;
  std::string log_level = "info";
  std::chrono::milliseconds start_timeout{20000};
  std::chrono::milliseconds stop_timeout{10000};
  // Parent of the temp dir; empty means $TMPDIR or /tmp. Unix socket paths
  // must stay under 108 bytes, so keep it short.
  std::string temp_parent;
};

class ContainerdHarness {
 public:
  static Result<std::unique_ptr<ContainerdHarness>> Start(ContainerdOptions options = {});
  ~ContainerdHarness();
  ContainerdHarness(const ContainerdHarness&) = delete;
  ContainerdHarness& operator=(const ContainerdHarness&) = delete;

  const std::string& dir() const { return dir_; }
  std::string grpc_address() const { return dir_ + "/containerd.sock"; }
  std::string ttrpc_address() const { return dir_ + "/containerd.sock.ttrpc"; }
  std::string root() const { return dir_ + "/root"; }
  std::string state() const { return dir_ + "/state"; }
  std::string config_path() const { return dir_ + "/config.toml"; }
  std::string log_path() const { return dir_ + "/containerd.log"; }
  pid_t pid() const { return daemon_ ? daemon_->pid() : -1; }
  const ContainerdOptions& options() const { return options_; }

  // The `ctr` command line for this daemon: {ctr, "-a", grpc_address()}.
  std::vector<std::string> CtrArgv(const std::vector<std::string>& args) const;
  // `ctr -a <grpc> args...` to completion (put "-n", ns first for a namespace).
  Result<CommandResult> Ctr(const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // A long-running ctr, e.g. {"events"}.
  Result<StreamingCommand> StartCtr(const std::vector<std::string>& args) const;
  // `ctr events`, returned only once its subscription demonstrably receives
  // events (ctr prints nothing when it subscribes, so the harness creates
  // probe namespaces until one shows up). Events after this call are seen.
  Result<StreamingCommand> SubscribeEvents(
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

  // Last `max_bytes` of containerd's log, for failure messages.
  std::string LogTail(size_t max_bytes = 4096) const;

  // Stops containerd (SIGTERM, SIGKILL after stop_timeout), unmounts what is
  // mounted under dir(), removes dir(). Idempotent; the destructor calls it.
  Status Stop();

 private:
  ContainerdHarness(ContainerdOptions options, TempDir dir);
  std::string RenderConfig() const;
  Status WaitUntilServing();

  ContainerdOptions options_;
  std::optional<TempDir> temp_;
  std::string dir_;
  std::optional<ChildProcess> daemon_;
};

// Unmounts (lazily, deepest first) every mount point strictly below `dir`.
Status UnmountUnder(const std::string& dir);

}  // namespace capsule::testing
