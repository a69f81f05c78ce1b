// start: group -> socket address -> reuse a live daemon, or bind the socket
// and fork/exec a detached daemon that inherits it.
#include "shim/launcher/start.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/runtime_options.h"
#include "shim/launcher/socket.h"

namespace capsule::shim::launcher {
namespace {

const log::Logger kStartLog("shim.start");

// The daemon finds its listening socket at fd 3, as containerd's Go shims
// do (exec.Cmd ExtraFiles[0]); -socket-fd says so explicitly.
constexpr int kDaemonSocketFd = 3;

// Highest oom_score_adj (from linux/oom.h, OOM_SCORE_ADJ_MAX).
constexpr int kOomScoreAdjMax = 1000;

// Like containerd's AdjustOOMScore: the shim gets containerd's score + 1, so
// under memory pressure the kernel picks the shim before containerd. Only
// ever raises the score (root here may lack CAP_SYS_RESOURCE to lower it).
void RaiseOomScore(pid_t daemon) {
  auto parent = ReadFile(fmt::format("/proc/{}/oom_score_adj", ::getppid()));
  if (!parent.ok()) {
    kStartLog.Warn("oom score: {}", parent.status().ToString());
    return;
  }
  int score = std::atoi(parent->c_str());
  score = std::min(score + 1, kOomScoreAdjMax);
  Status st = WriteFile(fmt::format("/proc/{}/oom_score_adj", daemon), std::to_string(score));
  if (!st.ok()) kStartLog.Warn("oom score of shim daemon {}: {}", daemon, st.ToString());
}

// Binds the group's socket; if a live daemon owns it, returns no fd (reuse).
Result<UniqueFd> ClaimSocket(const std::string& path) {
  auto fd = ListenUnix(path);
  if (fd.ok() || fd.status().code() != Code::kAlreadyExists) return fd;
  if (CanConnect(path)) return UniqueFd();
  // A socket file nobody serves: left by a daemon that died. Take it over.
  kStartLog.Info("removing stale shim socket {}", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove stale socket " + path);
  auto retry = ListenUnix(path);
  if (!retry.ok()) return std::move(retry).status().WithContext("create shim socket after removing a stale one");
  return retry;
}

Result<pid_t> SpawnDaemon(const StartRequest& req, int listen_fd, const std::string& config_path) {
  SpawnOptions o;
  o.argv = {req.daemon_exe};
  for (auto& a : DaemonArgs(req.flags, req.bundle, kDaemonSocketFd, config_path))
    o.argv.push_back(std::move(a));
  o.extra_fds = {{kDaemonSocketFd, listen_fd}};
  o.cwd = req.bundle;
  o.new_session = true;  // own session: containerd's signals to start's group miss it
  // stdio stay /dev/null: containerd waits for EOF on start's output pipe.
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  return child.Release();  // the daemon outlives us
}

}  // namespace

Result<std::string> StartShim(const StartRequest& req) {
  ASSIGN_OR_RETURN(RuntimeOptions options, ParseRuntimeOptions(req.options));
  ASSIGN_OR_RETURN(std::string group, ShimGroup(req.bundle, req.flags.id));
  const std::string address = SocketAddress(req.flags.address, req.flags.namespace_, group, req.socket_dir);
  ASSIGN_OR_RETURN(std::string path, SocketPathFromAddress(address));

  ASSIGN_OR_RETURN(UniqueFd listen_fd, ClaimSocket(path));
  if (!listen_fd) {
    kStartLog.Info("task {} joins shim group {} at {}", req.flags.id, group, address);
    RETURN_IF_ERROR_CTX(WriteAddressFile(req.bundle, address), "record existing shim address");
    return address;
  }
  auto daemon = SpawnDaemon(req, listen_fd.get(), options.config_path);
  if (!daemon.ok()) {
    ::unlink(path.c_str());
    return std::move(daemon).status().WithContext("start shim daemon");
  }
  if (Status st = WriteAddressFile(req.bundle, address); !st.ok()) {
    // Without the address file containerd cannot find the daemon again; undo.
    ::kill(*daemon, SIGKILL);
    ::unlink(path.c_str());
    return st.WithContext("record shim address");
  }
  RaiseOomScore(*daemon);
  kStartLog.Info("started shim daemon pid {} for group {} at {} (config {})", *daemon, group, address,
                 options.config_path.empty() ? "default" : options.config_path);
  return address;
}

}  // namespace capsule::shim::launcher
