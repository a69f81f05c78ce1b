// Process lifecycle of capsule-agent. Signals are blocked in every thread
// and read from a signalfd by the main thread, which also waits on the
// power-off eventfd, so all ways to stop meet in one place (WaitForStop).
#include "agent/app/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <exception>
#include <string_view>

#include "agent/containers/engine_ops.h"
#include "agent/engine/pod_holder.h"
#include "agent/engine/rehearsal.h"
#include "agent/init/boot.h"
#include "agent/init/power.h"
#include "agent/modules/modprobe_helper.h"
#include "agent/net/netlink_network.h"
#include "agent/system/fw_cfg.h"
#include "agent/system/guest_system.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reaper.h"
#include "runtime/common/version.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::app {
namespace {

const log::Logger kAgentLog("agent");

// How long calls in flight may finish once the agent stops; long polls
// (WaitProcess, ReadStdout) are cancelled after it.
constexpr std::chrono::milliseconds kShutdownGrace(1000);
// capsule.vsock=serial: where the host's streams arrive (the agent's own
// root, which no container sees), and how long the port may take to appear.
constexpr std::string_view kSerialSocketDir = "/run/capsule-agent";
constexpr std::string_view kSerialSocketPrefix = "/run/capsule-agent/vsock";
constexpr std::chrono::milliseconds kSerialPortWait(10000);

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// --no-init: private mount namespace (slave of the host's, so nothing we
// mount propagates back) and UTS namespace (sethostname stays ours).
Status EnterPrivateNamespaces() {
  if (::unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0) return ErrnoStatus("unshare(CLONE_NEWNS|CLONE_NEWUTS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return ErrnoStatus("make / rslave");
  return Status::Ok();
}

// The guest mounts cgroup2 on /sys/fs/cgroup; a hybrid host (tests with
// --no-init) has it at /sys/fs/cgroup/unified. As PID 1 this runs before the
// boot duties mounted anything, so init mode names the guest's path outright.
std::string DefaultCgroupRoot(bool init) {
  if (init) return "/sys/fs/cgroup";
  struct statfs st{};
  if (::statfs("/sys/fs/cgroup", &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC) return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/unified";
}

engine::EngineOptions EngineOptionsFrom(const AgentOptions& options) {
  engine::EngineOptions out;
  out.cgroup_root = options.cgroup_root.empty() ? DefaultCgroupRoot(options.init) : options.cgroup_root;
  out.cgroup_parent = options.cgroup_parent;
  // Every pod's holder runs this binary (engine/pod_holder.h). The holder
  // is forked from the agent, so its /proc/self/exe is ours (and /proc is
  // not mounted yet when PID 1 gets here, so no readlink now).
  out.pod_holder_exe = "/proc/self/exe";
  return out;
}

}  // namespace

AgentProcess::AgentProcess(AgentOptions options, pod::EngineFactory engines)
    : options_(std::move(options)), engines_(std::move(engines)) {}

AgentProcess::~AgentProcess() {
  if (server_) server_->Shutdown(std::chrono::milliseconds(0));
}

void AgentProcess::Fatal(const Status& status) {
  kAgentLog.Error("fatal: {}", status.ToString());
  if (options_.init) init::PowerOff("fatal error: " + status.message());
  std::_Exit(1);
}

Status AgentProcess::Prepare() {
  const std::string dir =
      options_.modules_dir.empty() ? modules::KernelModuleLoader::DefaultDir() : options_.modules_dir;
  loader_ = std::make_unique<modules::KernelModuleLoader>(dir);
  if (options_.init) {
    ASSIGN_OR_RETURN(init::BootReport report, init::RunBootDuties(*loader_));
    if (options_.log_level) log::SetLevel(*options_.log_level);
    if (!report.settings.fault.empty() && !extensions_.interceptors)
      kAgentLog.Warn(
          "capsule.fault={} ignored: this agent has no fault switch (only the test build capsule-agent-faults "
          "has one)",
          report.settings.fault);
    MaybeStartDebugShell(report.settings.debug_shell);
    serial_vsock_wanted_ = report.settings.serial_vsock;
    return Status::Ok();
  }
  if (options_.private_namespaces) RETURN_IF_ERROR(EnterPrivateNamespaces());
  // Orphans of what the engine starts come back to us, not to the host's init.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return ErrnoStatus("prctl(PR_SET_CHILD_SUBREAPER)");
  return Status::Ok();
}

Status AgentProcess::Serve() {
  server::AgentServiceOptions service_options;
  service_options.may_set_clock = options_.init;
  service_options.max_blocking_calls = options_.max_blocking_calls;
  service_ = std::make_unique<server::AgentService>(service_options, pods_.get(), this);
  service_->SetContainerOps(containers_.get());
  auto network = net::NetlinkNetwork::Open();
  if (network.ok()) {
    network_ = std::move(network).value();
    service_->SetNetwork(network_.get());
  } else {
    kAgentLog.Warn("guest network RPCs disabled: {}", network.status().message());
  }
  std::string serial_port;
  if (serial_vsock_wanted_) {
    ASSIGN_OR_RETURN(serial_port, AwaitSerialPort());
    // The host's streams arrive as unix connections from the serial link.
    auto route = [](server::Endpoint& ep) {
      if (ep.kind != server::Endpoint::Kind::kVsock) return;
      const std::string path = channel::SerialVsock::ListenPath(std::string(kSerialSocketPrefix), ep.port);
      ep = server::Endpoint{server::Endpoint::Kind::kUnix, 0, path};
    };
    RETURN_IF_ERROR(MkdirAll(std::string(kSerialSocketDir), 0700));
    for (auto& ep : options_.listen) route(ep);
    if (options_.forward_listen) route(*options_.forward_listen);
  }
  server::ServerLimits limits;
  limits.max_blocking_calls = options_.max_blocking_calls;
  server::InterceptorFactories interceptors;
  if (extensions_.interceptors) interceptors = extensions_.interceptors();
  ASSIGN_OR_RETURN(server_, server::AgentServer::Start(service_.get(), options_.listen, limits, std::move(interceptors),
                                                       AgentTokenSource()));
  if (options_.forward_listen) {
    // Not fatal: the pod runs without `kubectl port-forward`.
    auto forwarder = forward::PortForwarder::Start(*options_.forward_listen, AgentTokenSource());
    if (forwarder.ok()) {
      forwarder_ = std::move(forwarder).value();
    } else {
      kAgentLog.Error("port-forward disabled: {}", forwarder.status().message());
    }
  }
  if (!serial_port.empty()) {
    // Last: requests the host queued on the port meet listening servers.
    ASSIGN_OR_RETURN(serial_vsock_, channel::SerialVsock::Start(serial_port, std::string(kSerialSocketPrefix)));
  }
  ready_us_ = system::BootTimeMicros();
  std::string where;
  for (const auto& ep : options_.listen) where += (where.empty() ? "" : " ") + ep.ToString();
  if (forwarder_) where += ", port-forward on " + options_.forward_listen->ToString();
  kAgentLog.Info("{}: serving capsule.agent.v1.Agent on {} ({:.3f} s after kernel start)", guest_abi::kAgentReadyMarker,
                 where, static_cast<double>(ready_us_.load()) / 1e6);
  SignalReady();
  return Status::Ok();
}

// Read by each gate once, and again when a peer names another token (a
// template clone's host hands it a token of its own after the restore).
server::TokenSource AgentProcess::AgentTokenSource() const {
  if (options_.init) {
    return server::RequireToken(
        [] { return system::ReadFwCfgFile(guest_abi::kAgentTokenFwCfgName, guest_abi::kAgentTokenHexLength); });
  }
  if (options_.auth_token_file.empty()) return nullptr;
  return [path = options_.auth_token_file]() -> Result<std::optional<std::string>> {
    ASSIGN_OR_RETURN(std::string token, ReadFile(path));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    return std::optional<std::string>(std::move(token));
  };
}

// The port shows up once its driver has heard from the device, a moment after
// the module loads.
Result<std::string> AgentProcess::AwaitSerialPort() {
  RETURN_IF_ERROR_CTX(loader_->Load({"virtio_console"}), "capsule.vsock=serial");
  Result<std::string> port = channel::FindVirtioPort(guest_abi::kVsockSerialPortName, kSerialPortWait);
  if (!port.ok()) return DeadlineExceeded("capsule.vsock=serial: " + port.status().message());
  // The port is named once its device exists, so its node is there too.
  if (::access(port->c_str(), R_OK | W_OK) != 0) return ErrnoStatus("capsule.vsock=serial: device node " + *port);
  return port;
}

void AgentProcess::SignalReady() {
  if (options_.ready_fd < 0) return;
  (void)!::write(options_.ready_fd, "ready\n", 6);
  ::close(options_.ready_fd);
  options_.ready_fd = -1;
}

void AgentProcess::MaybeStartDebugShell(bool wanted) {
  if (!wanted) return;
  if (::access("/bin/sh", X_OK) != 0) {
    kAgentLog.Warn("capsule.debug_shell: no /bin/sh in this image (build the debug image)");
    return;
  }
  SpawnOptions so;
  so.argv = {"/bin/sh"};
  so.env = std::vector<std::string>{"PATH=/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=linux"};
  so.stdin_fd = so.stdout_fd = so.stderr_fd = STDIN_FILENO;
  so.new_session = true;
  auto child = ChildProcess::Spawn(so);
  if (!child.ok()) {
    kAgentLog.Warn("debug shell: {}", child.status().message());
    return;
  }
  kAgentLog.Warn("debug shell started on the console (pid {}): not for production", child->pid());
  debug_shell_.emplace(std::move(child).value());
}

void AgentProcess::RequestPowerOff(std::string_view reason) {
  {
    std::lock_guard lock(reason_mu_);
    power_off_reason_ = std::string(reason);
  }
  uint64_t one = 1;
  (void)!::write(power_off_fd_.get(), &one, sizeof one);
}

std::string AgentProcess::WaitForStop() {
  for (;;) {
    pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {power_off_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return "poll failed: " + ErrnoStatus("poll").message();
    }
    if (fds[1].revents & POLLIN) {
      std::lock_guard lock(reason_mu_);
      return power_off_reason_;
    }
    signalfd_siginfo si{};
    if ((fds[0].revents & POLLIN) && ::read(signal_fd_.get(), &si, sizeof si) == sizeof si) {
      if (si.ssi_signo == SIGHUP) {
        kAgentLog.Info("SIGHUP ignored");
        continue;
      }
      return fmt::format("signal {} from pid {}", ::strsignal(static_cast<int>(si.ssi_signo)), si.ssi_pid);
    }
  }
}

void AgentProcess::Stop(const std::string& reason) {
  kAgentLog.Info("stopping: {}", reason);
  shutting_down_ = true;
  // A no-op after DestroySandbox; after a signal it stops the containers
  // and unmounts the storages before the VM goes.
  if (pods_) {
    if (Status st = pods_->Destroy(); !st.ok()) kAgentLog.Error("sandbox teardown: {}", st.message());
  }
  // Calls in flight get kShutdownGrace; every connection is closed after it,
  // which is also what flushes the DestroySandbox reply out of gRPC.
  if (forwarder_) forwarder_->Shutdown();
  if (server_) server_->Shutdown(kShutdownGrace);
  debug_shell_.reset();
}

int AgentProcess::Run() {
  sigset_t stop = StopSignals();
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread exists
  ::signal(SIGPIPE, SIG_IGN);
  signal_fd_.reset(::signalfd(-1, &stop, SFD_CLOEXEC));
  power_off_fd_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!signal_fd_ || !power_off_fd_) Fatal(ErrnoStatus("signalfd/eventfd for the main loop"));
  if (Status st = Prepare(); !st.ok()) Fatal(st);
  if (Status st = Reaper::Instance().Start(); !st.ok()) Fatal(st);
  // Before the agent answers: a pooled VM's template is snapshotted once
  // it does, so every clone carries what this makes.
  pod::PodEnvironment env;
  env.resolv_conf_path = options_.resolv_conf;
  env.apply_hostname = options_.init || options_.private_namespaces;
  env.modules = loader_.get();
  pods_ = std::make_unique<pod::PodSlot>(env, engines_);
  if (Status st = pods_->Prepare(); !st.ok())
    kAgentLog.Warn("not prepared ahead of the sandbox ({}); made when the sandbox is set up instead", st.ToString());
  containers_ = std::make_unique<containers::EngineOps>(pods_.get(), loader_.get());
  if (Status st = Serve(); !st.ok()) Fatal(st);
  std::string reason = WaitForStop();
  Stop(reason);
  if (options_.init) init::PowerOff(reason);
  kAgentLog.Info("exiting (--no-init)");
  return 0;
}

int RunAgent(int argc, char** argv, AgentExtensions extensions) {
  // The guest kernel runs us as /sbin/capsule-modprobe to load a module.
  if (argc > 0 && modules::IsModprobeHelper(argv[0])) return modules::RunModprobeHelper(argc, argv);
  // The engine runs our own binary as each pod's holder (pod_holder.h).
  if (argc == 2 && std::string_view(argv[1]) == engine::kPodHolderArg) return engine::RunPodHolder();
  // The rehearsal's container process (rehearsal.h): it only has to exist.
  if (argc == 2 && std::string_view(argv[1]) == engine::kRehearsalArg) return 0;
  const bool is_pid1 = ::getpid() == 1;
  ParsedArgs args = ParseArgs(argc, argv, is_pid1);
  if (args.exit_code) return *args.exit_code;
  if (args.options.log_level) log::SetLevel(*args.options.log_level);
  const bool init = args.options.init;
  if (init) {
    // An exception nobody caught must not kill PID 1 (a kernel panic).
    std::set_terminate([] { init::PowerOff("std::terminate: uncaught exception"); });
  }
  kAgentLog.Info("capsule-agent {} starting (pid {}, {})", kVersion, ::getpid(), init ? "init" : "--no-init");
  const engine::EngineOptions engine_options = EngineOptionsFrom(args.options);
  // The engine itself is made in Run (PodSlot::Prepare), once the reaper it
  // needs is running.
  AgentProcess agent(std::move(args.options), pod::LinuxEngine(engine_options));
  agent.SetExtensions(std::move(extensions));
  return agent.Run();
}

}  // namespace capsule::agent::app
