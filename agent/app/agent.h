// AgentProcess: the capsule-agent program. As PID 1 it boots the guest
// (agent/init), serves gRPC on vsock and, when told to stop (SIGTERM,
// SIGINT, DestroySandbox with power_off) or when something fatal happens,
// tears the sandbox down and powers the VM off; it never exits. As a normal
// process (--no-init) it serves on a unix socket and exits instead.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/app/options.h"
#include "agent/channel/serial_vsock.h"
#include "agent/forward/port_forwarder.h"
#include "agent/modules/loader.h"
#include "agent/net/network.h"
#include "agent/pod/pod_slot.h"
#include "agent/server/agent_service.h"
#include "agent/server/grpc_server.h"
#include "agent/server/lifecycle.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::app {

// What a build of the agent adds to the product: the test build's fault
// switch (agent/faults) installs gRPC interceptors. Made once serving
// starts (the PID-1 boot duties have mounted /proc by then).
struct AgentExtensions {
  std::function<server::InterceptorFactories()> interceptors;
};

// Entry point for main(): the modprobe helper when run as
// /sbin/capsule-modprobe, the pod holder with --pod-holder, else parses
// argv and runs the agent.
int RunAgent(int argc, char** argv, AgentExtensions extensions = {});

class AgentProcess final : public server::AgentLifecycle {
 public:
  // `engines` makes the pod's container engine (agent/pod).
  AgentProcess(AgentOptions options, pod::EngineFactory engines);
  ~AgentProcess() override;

  // Returns the exit code (never returns as PID 1).
  int Run();

  // Call before Run.
  void SetExtensions(AgentExtensions extensions) { extensions_ = std::move(extensions); }

  void RequestPowerOff(std::string_view reason) override;
  bool shutting_down() const override { return shutting_down_.load(); }
  uint64_t ready_monotonic_us() const override { return ready_us_.load(); }

 private:
  Status Prepare();  // PID-1 boot, or namespaces for --no-init
  Status Serve();
  std::string WaitForStop();  // returns why
  void Stop(const std::string& reason);
  [[noreturn]] void Fatal(const Status& status);
  void MaybeStartDebugShell(bool wanted);
  void SignalReady();
  server::TokenSource AgentTokenSource() const;
  Result<std::string> AwaitSerialPort();

  AgentOptions options_;
  AgentExtensions extensions_;
  UniqueFd signal_fd_;     // SIGTERM, SIGINT, SIGHUP
  UniqueFd power_off_fd_;  // eventfd written by RequestPowerOff
  std::unique_ptr<modules::KernelModuleLoader> loader_;
  const pod::EngineFactory engines_;
  std::unique_ptr<pod::PodSlot> pods_;   // declared before what points at it
  server::ContainerOpsPtr containers_;  // likewise
  net::NetworkPtr network_;              // likewise
  std::unique_ptr<server::AgentService> service_;
  std::unique_ptr<server::AgentServer> server_;
  std::unique_ptr<forward::PortForwarder> forwarder_;
  // Declared after the servers it feeds, so it stops first.
  bool serial_vsock_wanted_ = false;  // capsule.vsock=serial
  channel::SerialVsockPtr serial_vsock_;
  std::optional<ChildProcess> debug_shell_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> ready_us_{0};
  std::mutex reason_mu_;
  std::string power_off_reason_;  // guarded by reason_mu_
};

}  // namespace capsule::agent::app
