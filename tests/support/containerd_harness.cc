// See containerd_harness.h. Readiness is "both sockets accept and
// `ctr version` answers"; containerd gives no other signal, so the wait
// polls the daemon's pidfd with a short timeout between probes (a dying
// daemon ends the wait at once). CRI/CNI rendering lives in
// containerd_cri.cc, the leak scan and clean-up in containerd_leaks.cc.
#include "tests/support/containerd_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/common/backoff.h"
#include "runtime/common/logging.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

const log::Logger kContainerdHarnessLog("containerd-harness");

// Pause between readiness probes; containerd 1.6 boots in ~0.1 s here.
constexpr int kProbeIntervalMs = 20;
// How long one probe event may take to reach `ctr events` before the
// subscription is assumed not to be in place yet and another is sent.
constexpr int kProbeWaitMs = 250;
// sizeof(sockaddr_un::sun_path) - 1.
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;
constexpr const char* kCriPlugin = "io.containerd.grpc.v1.cri";
// containerd's metadata store under root (plugin io.containerd.metadata.v1.bolt).
constexpr const char* kMetadataDb = "io.containerd.metadata.v1.bolt/meta.db";

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

// PATH with `dirs` in front of `base` (the inherited PATH when unset).
std::string PathWith(const std::vector<std::string>& dirs, std::optional<std::string> base) {
  if (!base) {
    const char* inherited = std::getenv("PATH");
    base = inherited != nullptr ? inherited : "/usr/sbin:/usr/bin:/sbin:/bin";
  }
  std::string path;
  for (const auto& d : dirs) path += d + ":";
  return path + *base;
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

ContainerdHarness::ContainerdHarness(ContainerdOptions options, TempDir dir)
    : options_(std::move(options)), temp_(std::move(dir)), dir_(temp_->path()) {}

ContainerdHarness::~ContainerdHarness() {
  Status st = Stop();
  if (!st.ok()) kContainerdHarnessLog.Error("cleanup of {}: {}", dir_, st.ToString());
}

Result<std::unique_ptr<ContainerdHarness>> ContainerdHarness::Start(ContainerdOptions options) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("capsule-ctrd", options.temp_parent));
  std::unique_ptr<ContainerdHarness> h(new ContainerdHarness(std::move(options), std::move(dir)));
  if (h->ttrpc_address().size() > kMaxSocketPath) {
    return InvalidArgument("containerd harness: socket path " + h->ttrpc_address() +
                           " is longer than " + std::to_string(kMaxSocketPath) +
                           " bytes; use a shorter temp_parent");
  }
  if (h->options_.cri) {
    auto& disabled = h->options_.disabled_plugins;
    disabled.erase(std::remove(disabled.begin(), disabled.end(), kCriPlugin), disabled.end());
    RETURN_IF_ERROR(MkdirAll(h->cni_conf_dir()));
    if (h->options_.cri->cni) RETURN_IF_ERROR(h->WriteCniConfig());
  }
  h->netns_before_ = DirEntries(kCniNetnsDir);
  RETURN_IF_ERROR(WriteFile(h->config_path(), h->RenderConfig()));
  h->run_config_ = h->config_path();
  if (h->options_.prepare_config) {
    ASSIGN_OR_RETURN(h->run_config_, h->options_.prepare_config(h->config_path()));
  }
  RETURN_IF_ERROR(h->Spawn());
  RETURN_IF_ERROR(h->WaitUntilServing());
  return h;
}

Status ContainerdHarness::WriteCniConfig() {
  CniNetwork net = RandomCniNetwork();
  RETURN_IF_ERROR(WriteFile(cni_conf_dir() + "/10-capsule-test.conflist",
                            RenderCniConflist(net, dir_ + "/cni-ipam")));
  kContainerdHarnessLog.Info("CNI bridge {} subnet {} for containerd in {}", net.bridge, net.subnet, dir_);
  cni_ = std::move(net);
  return Status::Ok();
}

Status ContainerdHarness::Spawn() {
  UniqueFd log(::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return ErrnoStatus("open " + log_path());
  std::vector<std::pair<std::string, std::string>> env = options_.env;
  if (!options_.path_prepend.empty()) {
    auto path = std::find_if(env.begin(), env.end(), [](const auto& kv) { return kv.first == "PATH"; });
    if (path == env.end()) {
      env.emplace_back("PATH", PathWith(options_.path_prepend, std::nullopt));
    } else {
      path->second = PathWith(options_.path_prepend, path->second);
    }
  }
  SpawnOptions o;
  o.argv = {options_.containerd_binary, "--config", run_config_};
  if (!env.empty()) o.env = EnvironmentWith(env);
  o.stdout_fd = log.get();
  o.stderr_fd = log.get();
  o.die_with_parent = true;  // a crashed test must not leave a daemon behind
  Result<ChildProcess> child = ChildProcess::Spawn(o);
  if (!child.ok()) return std::move(child).status().WithContext("start " + options_.containerd_binary);
  daemon_.emplace(std::move(*child));
  kContainerdHarnessLog.Info("started containerd pid {} in {}", pid(), dir_);
  return Status::Ok();
}

std::string ContainerdHarness::RenderConfig() const {
  std::ostringstream c;
  c << "# Generated by ContainerdHarness for one test run.\n"
    << "version = 2\n"
    << "root = " << TomlQuote(root()) << "\n"
    << "state = " << TomlQuote(state()) << "\n"
    << "disabled_plugins = [";
  for (size_t i = 0; i < options_.disabled_plugins.size(); ++i) {
    c << (i ? ", " : "") << TomlQuote(options_.disabled_plugins[i]);
  }
  c << "]\n\n"
    << "[grpc]\n  address = " << TomlQuote(grpc_address()) << "\n\n"
    << "[ttrpc]\n  address = " << TomlQuote(ttrpc_address()) << "\n\n"
    << "[debug]\n  address = \"\"\n  level = " << TomlQuote(options_.log_level) << "\n\n"
    // Default is /opt/containerd, outside the temp dir.
    << "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = " << TomlQuote(dir_ + "/opt")
    << "\n";
  if (options_.cri) c << "\n" << RenderCriToml(*options_.cri, cni_conf_dir());
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

Result<std::string> ContainerdHarness::CtrOutput(const std::vector<std::string>& args,
                                                  std::chrono::milliseconds timeout) const {
  std::string cmd = "ctr";
  for (const auto& a : args) cmd += " " + a;
  Result<CommandResult> r = Ctr(args, timeout);
  if (!r.ok()) return std::move(r).status().WithContext(cmd);
  if (!r->ok()) {
    return Internal(cmd + " exited " + std::to_string(r->exit_code) + ": " + r->err + r->out);
  }
  return std::move(r->out);
}

Status ContainerdHarness::ImportImage(const std::string& tar, const std::string& ns,
                                      std::chrono::milliseconds timeout) const {
  Result<std::string> out = CtrOutput({"-n", ns, "images", "import", tar}, timeout);
  if (!out.ok()) return std::move(out).status().WithContext("import image " + tar);
  return Status::Ok();
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

Result<std::string> ContainerdHarness::WaitForLog(const std::string& needle, std::chrono::milliseconds timeout,
                                                  size_t max_bytes) const {
  std::string log;
  if (WaitUntil([&] { return (log = LogTail(max_bytes)).find(needle) != std::string::npos; }, timeout)) return log;
  return DeadlineExceeded("\"" + needle + "\" not in containerd's log after " + std::to_string(timeout.count()) +
                          " ms; its tail:\n" + log.substr(log.size() > 4096 ? log.size() - 4096 : 0));
}

Status ContainerdHarness::Restart() {
  if (!temp_) return FailedPrecondition("containerd harness: Restart after Stop");
  if (daemon_ && !daemon_->reaped()) {
    int status = daemon_->Terminate(options_.stop_timeout);
    kContainerdHarnessLog.Info("containerd pid {} stopped for restart (exit {})", daemon_->pid(), ExitCode(status));
  }
  daemon_.reset();
  RETURN_IF_ERROR_CTX(Spawn(), "restart containerd in " + dir_);
  RETURN_IF_ERROR_CTX(WaitUntilServing(), "restart containerd in " + dir_);
  return Status::Ok();
}

LeakScope ContainerdHarness::Scope() const {
  LeakScope scope;
  scope.address = grpc_address();
  scope.daemon_pid = daemon_ && !daemon_->reaped() ? daemon_->pid() : -1;
  scope.dir = dir_;
  if (cni_) scope.bridge = cni_->bridge;
  scope.netns_before = netns_before_;
  scope.metadata_db = root() + "/" + kMetadataDb;
  return scope;
}

std::vector<std::string> ContainerdHarness::Leaks() const {
  if (!temp_) return {};
  const LeakScope scope = Scope();
  return ScanLeaks(scope).Describe(scope);
}

Status ContainerdHarness::Stop() {
  if (!temp_) return Status::Ok();
  if (daemon_ && !daemon_->reaped()) {
    int status = daemon_->Terminate(options_.stop_timeout);
    kContainerdHarnessLog.Info("containerd pid {} stopped (exit {})", daemon_->pid(), ExitCode(status));
  }
  daemon_.reset();
  // Shims first: they hold mounts (rootfs, shm) and netns open.
  Status cleaned = CleanUpLeaks(Scope());
  Status removed = RemoveAll(dir_);
  temp_->Release();
  temp_.reset();
  RETURN_IF_ERROR_CTX(cleaned, "containerd harness cleanup");
  RETURN_IF_ERROR_CTX(removed, "containerd harness cleanup");
  return Status::Ok();
}

}  // namespace capsule::testing
