// ContainerdHarness: a private containerd 1.6 for integration tests. Its
// root, state, sockets, config and log all live in one temp dir; Start()
// returns once the gRPC and ttrpc sockets answer; the destructor stops the
// daemon, kills leftover shims, unmounts anything left below the dir (and
// with CNI removes leftover pod netns and the bridge) and removes the dir,
// so a failing test leaves nothing behind. Extend it through
// ContainerdOptions (plugin sections, enabled plugins, environment, CRI)
// rather than by editing the file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "tests/support/command.h"
#include "tests/support/containerd_cri.h"
#include "tests/support/containerd_leaks.h"

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
  // Directories put in front of containerd's PATH (after `env`): where it
  // looks for shim binaries (containerd-shim-<name>-<version>) by runtime
  // type; containerd 1.6's CRI ignores runtime_path.
  std::vector<std::string> path_prepend;
  // Set: the CRI plugin is enabled (removed from disabled_plugins) and
  // configured for this host (see containerd_cri.h); with cri->cni, pods get
  // a CNI bridge network of this harness's own.
  std::optional<CriOptions> cri;
  std::string log_level = "info";
  // Called with the generated config's path before containerd starts;
  // returns the config containerd runs with (the node installer's test
  // writes the generated one into a scratch root and installs there).
  std::function<Result<std::string>(const std::string& generated_config)> prepare_config;
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
  // Where the CNI conflist lives (set up only with options.cri).
  std::string cni_conf_dir() const { return dir_ + "/cni"; }
  // The pods' network; set when options.cri->cni.
  const std::optional<CniNetwork>& cni() const { return cni_; }

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

  // Stdout of a `ctr -a <grpc> args...` that must succeed; a non-zero exit
  // is an error naming the command, its exit code and stderr.
  Result<std::string> CtrOutput(const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // `ctr -n <ns> images import <tar>`.
  Status ImportImage(const std::string& tar, const std::string& ns = "k8s.io",
                     std::chrono::milliseconds timeout = std::chrono::seconds(120)) const;

  // Last `max_bytes` of containerd's log, for failure messages.
  std::string LogTail(size_t max_bytes = 4096) const;
  // The last `max_bytes` of the log once they hold `needle`. A shim's lines
  // reach that log through a pipe containerd copies on its own time, so a
  // line a shim wrote before it answered a call can land after the call
  // returned (on a loaded host, after the test looked).
  Result<std::string> WaitForLog(const std::string& needle, std::chrono::milliseconds timeout,
                                 size_t max_bytes = 8 << 20) const;

  // Stops containerd (SIGTERM, SIGKILL after stop_timeout) and starts it
  // again on the same root, state, config, log and dir; returns once it
  // serves. It reloads the shims it had (or cleans up after dead ones).
  // CRI may still answer "not initialized" for a moment after.
  Status Restart();

  // What this containerd left behind: processes naming its address (shims;
  // also a `ctr events` the test still runs), mounts under dir(), and with
  // CNI the cni-* netns made since Start() that its metadata names (not
  // other tests' pods) and ports still on its bridge. One line each; empty
  // when clean. Assert it before Stop(), which cleans all of it up.
  std::vector<std::string> Leaks() const;

  // Stops containerd (SIGTERM, SIGKILL after stop_timeout), kills leftover
  // shims, unmounts what is mounted under dir(), removes leftover pod netns
  // and the CNI bridge, removes dir(). Idempotent; the destructor calls it.
  Status Stop();

 private:
  ContainerdHarness(ContainerdOptions options, TempDir dir);
  std::string RenderConfig() const;
  Status WriteCniConfig();
  Status Spawn();
  Status WaitUntilServing();
  LeakScope Scope() const;

  ContainerdOptions options_;
  std::optional<TempDir> temp_;
  std::string dir_;
  std::string run_config_;  // the config containerd runs with (prepare_config)
  std::optional<ChildProcess> daemon_;
  std::optional<CniNetwork> cni_;
  std::vector<std::string> netns_before_;  // kCniNetnsDir entries at Start()
};

// UnmountUnder(dir) is declared in containerd_leaks.h (included above).

}  // namespace capsule::testing
