// See containerd_harness.h. Readiness is "both sockets accept and
// `ctr version` answers"; containerd gives no other signal, so the wait
// polls the daemon's pidfd with a short timeout between probes (a dying
// daemon ends the wait at once).
#include "tests/support/containerd_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/common/logging.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

const log::Logger kLog("containerd-harness");

// Pause between readiness probes; containerd 1.6 boots in ~0.1 s here.
constexpr int kProbeIntervalMs = 20;
// How long one probe event may take to reach `ctr events` before the
// subscription is assumed not to be in place yet and another is sent.
constexpr int kProbeWaitMs = 250;
// sizeof(sockaddr_un::sun_path) - 1.
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

std::string TomlString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

bool CanConnect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// Undoes mountinfo's octal escapes ("\040" for a space).
std::string UnescapeMountPath(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> DefaultDisabledPlugins() {
  return {
      "io.containerd.grpc.v1.cri",
      "io.containerd.snapshotter.v1.btrfs",
      "io.containerd.snapshotter.v1.aufs",
      "io.containerd.snapshotter.v1.zfs",
      "io.containerd.snapshotter.v1.devmapper",
      "io.containerd.internal.v1.tracing",
      "io.containerd.tracing.processor.v1.otlp",
  };
}

Status UnmountUnder(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return ErrnoStatus("open /proc/self/mountinfo");
  const std::string prefix = dir + "/";
  std::vector<std::string> targets;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    mount_point = UnescapeMountPath(mount_point);
    if (mount_point.rfind(prefix, 0) == 0) targets.push_back(mount_point);
  }
  // Deepest first, so a mount never hides one below it.
  std::sort(targets.begin(), targets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  Status result;
  for (const auto& t : targets) {
    if (::umount2(t.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT && result.ok()) {
      result = ErrnoStatus("umount " + t);
    }
  }
  return result;
}

ContainerdHarness::ContainerdHarness(ContainerdOptions options, TempDir dir)
    : options_(std::move(options)), temp_(std::move(dir)), dir_(temp_->path()) {}

ContainerdHarness::~ContainerdHarness() {
  Status st = Stop();
  if (!st.ok()) kLog.Error("cleanup of {}: {}", dir_, st.ToString());
}

Result<std::unique_ptr<ContainerdHarness>> ContainerdHarness::Start(ContainerdOptions options) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("capsule-ctrd", options.temp_parent));
  std::unique_ptr<ContainerdHarness> h(new ContainerdHarness(std::move(options), std::move(dir)));
  if (h->ttrpc_address().size() > kMaxSocketPath) {
    return InvalidArgument("containerd harness: socket path " + h->ttrpc_address() +
                           " is longer than " + std::to_string(kMaxSocketPath) +
                           " bytes; use a shorter temp_parent");
  }
  RETURN_IF_ERROR(WriteFile(h->config_path(), h->RenderConfig()));
  UniqueFd log(::open(h->log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return ErrnoStatus("open " + h->log_path());
  SpawnOptions o;
  o.argv = {h->options_.containerd_binary, "--config", h->config_path()};
  if (!h->options_.env.empty()) o.env = EnvironmentWith(h->options_.env);
  o.stdout_fd = log.get();
  o.stderr_fd = log.get();
  o.die_with_parent = true;  // a crashed test must not leave a daemon behind
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  h->daemon_.emplace(std::move(child));
  kLog.Info("started containerd pid {} in {}", h->pid(), h->dir());
  RETURN_IF_ERROR(h->WaitUntilServing());
  return h;
}

std::string ContainerdHarness::RenderConfig() const {
  std::ostringstream c;
  c << "# Generated by ContainerdHarness for one test run.\n"
    << "version = 2\n"
    << "root = " << TomlString(root()) << "\n"
    << "state = " << TomlString(state()) << "\n"
    << "disabled_plugins = [";
  for (size_t i = 0; i < options_.disabled_plugins.size(); ++i) {
    c << (i ? ", " : "") << TomlString(options_.disabled_plugins[i]);
  }
  c << "]\n\n"
    << "[grpc]\n  address = " << TomlString(grpc_address()) << "\n\n"
    << "[ttrpc]\n  address = " << TomlString(ttrpc_address()) << "\n\n"
    << "[debug]\n  address = \"\"\n  level = " << TomlString(options_.log_level) << "\n\n"
    // Default is /opt/containerd, outside the temp dir.
    << "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = " << TomlString(dir_ + "/opt")
    << "\n";
  for (const auto& extra : options_.extra_toml) c << "\n" << ReplaceAll(extra, "@DIR@", dir_) << "\n";
  return c.str();
}

Status ContainerdHarness::WaitUntilServing() {
  const auto deadline = Clock::now() + options_.start_timeout;
  while (true) {
    if (daemon_->TryReap()) {
      return Unavailable("containerd exited during start-up; log:\n" + LogTail());
    }
    if (CanConnect(grpc_address()) && CanConnect(ttrpc_address())) {
      Result<CommandResult> v = Ctr({"version"}, std::chrono::seconds(10));
      if (v.ok() && v->ok()) return Status::Ok();
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("containerd not serving on " + grpc_address() + " after " +
                              std::to_string(options_.start_timeout.count()) + " ms; log:\n" +
                              LogTail());
    }
    pollfd p{daemon_->pidfd(), POLLIN, 0};
    ::poll(&p, 1, kProbeIntervalMs);
  }
}

std::vector<std::string> ContainerdHarness::CtrArgv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {options_.ctr_binary, "-a", grpc_address()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Result<CommandResult> ContainerdHarness::Ctr(const std::vector<std::string>& args,
                                             std::chrono::milliseconds timeout) const {
  return RunCommand(CtrArgv(args), timeout);
}

Result<StreamingCommand> ContainerdHarness::StartCtr(const std::vector<std::string>& args) const {
  return StreamingCommand::Start(CtrArgv(args));
}

Result<StreamingCommand> ContainerdHarness::SubscribeEvents(std::chrono::milliseconds timeout) const {
  ASSIGN_OR_RETURN(StreamingCommand events, StartCtr({"events"}));
  const auto deadline = Clock::now() + timeout;
  for (int probe = 0;; ++probe) {
    const std::string name = "harness-probe-" + std::to_string(probe);
    ASSIGN_OR_RETURN(CommandResult r, Ctr({"namespaces", "create", name}));
    if (!r.ok()) return Internal("ctr namespaces create " + name + ": " + r.err);
    Result<std::string> seen = events.WaitForOutput("\"name\":\"" + name + "\"",
                                                    std::chrono::milliseconds(kProbeWaitMs));
    if (seen.ok()) return events;
    if (seen.status().code() != Code::kDeadlineExceeded || Clock::now() >= deadline) {
      return std::move(seen).status().WithContext("subscribe to containerd events");
    }
  }
}

std::string ContainerdHarness::LogTail(size_t max_bytes) const {
  Result<std::string> log = ReadFile(log_path());
  if (!log.ok()) return "(no log: " + log.status().message() + ")";
  return log->size() <= max_bytes ? *log : log->substr(log->size() - max_bytes);
}

Status ContainerdHarness::Stop() {
  if (!temp_) return Status::Ok();
  if (daemon_ && !daemon_->reaped()) {
    int status = daemon_->Terminate(options_.stop_timeout);
    kLog.Info("containerd pid {} stopped (exit {})", daemon_->pid(), ExitCode(status));
  }
  daemon_.reset();
  Status unmounted = UnmountUnder(dir_);
  Status removed = RemoveAll(dir_);
  temp_->Release();
  temp_.reset();
  RETURN_IF_ERROR_CTX(unmounted, "containerd harness cleanup");
  RETURN_IF_ERROR_CTX(removed, "containerd harness cleanup");
  return Status::Ok();
}

}  // namespace capsule::testing
