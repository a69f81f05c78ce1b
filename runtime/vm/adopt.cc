// SandboxVm::Adopt: takes over a VM another process booted and detached,
// part by part from its state dir: the VMM (Hypervisor::Attach: lock,
// vm.json, the very same QEMU process, QMP), the vsock host end
// (vsock.json), virtiofsd (its pid file and share mount), then a short
// ConnectAgent, or a Check on the agent stream the caller was handed, which
// needs nothing of the VMM and so runs beside the VMM's attach. A
// part that is gone is logged and left out, and a VM whose VMM died is
// still returned, so that Stop() can clean up whatever is left.
// So is a boot cut short before QEMU's vm.json (its launcher was killed):
// the QEMU it started is found by its command line and killed at once, and
// the VM comes back without a VMM for Stop() to remove the rest.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <future>

#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/vm/boot_steps.h"
#include "runtime/vm/sandbox_vm_impl.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
const log::Logger kAdoptLog("vm");

// An adopted VM's agent is already up: it answers at once or not at all.
constexpr milliseconds kAdoptConnectTimeout{5000};
// The Check on a handed-over stream; a dead one leaves time to dial.
constexpr milliseconds kHandedOverCheckTimeout{2000};

void AdoptHostEnds(SandboxVmImpl& vm) {
  auto v = vsock::AdoptVmVsock(vm.state_dir());
  if (v.ok()) {
    vm.SetVsock(std::move(*v));
  } else {
    kAdoptLog.Warn("VM {}: vsock host end not adopted: {}", vm.id(), v.status().message());
  }
  // The dense device set has no virtiofsd, so nothing to adopt.
  if (!PathExists(virtiofs::VirtiofsPaths(vm.state_dir()).pidfile())) return;
  auto fs = virtiofs::VirtiofsDaemon::Attach(vm.state_dir());
  if (fs.ok()) {
    vm.SetVirtiofsd(std::move(*fs));
  } else {
    kAdoptLog.Warn("VM {}: virtiofsd not adopted: {}", vm.id(), fs.status().message());
  }
}

// The options every connection of an adoption has: the call deadline and
// the VM's call statistics, counted from the adoption on (one sink for the
// handed-over stream's Check and a dial after it).
agentclient::ConnectOptions AdoptOptions(const std::string& state_dir, milliseconds agent_timeout,
                                         agentclient::ConnectTimings* timings) {
  agentclient::ConnectOptions o;
  o.deadline = kAdoptConnectTimeout;
  o.default_call_timeout = agent_timeout;
  o.on_call_end = AgentCallStatsFor(state_dir);
  o.timings = timings;
  return o;
}

using HandedOver = std::future<Result<agentclient::AgentClientPtr>>;

// How the adopter reached the agent, for the adoption's log line.
enum class AgentPath { kDialled, kHandedOver, kDialledAfterHandedOver };

std::string_view AgentPathName(AgentPath p) {
  switch (p) {
    case AgentPath::kDialled: return "dialled";
    case AgentPath::kHandedOver: return "on the stream handed over, checked beside the attach";
    case AgentPath::kDialledAfterHandedOver: return "dialled after the stream handed over failed";
  }
  return "?";
}

// The handed-over stream's Check, started before the VMM's attach; an
// invalid future when the caller was handed no stream.
HandedOver CheckHandedOver(UniqueFd stream, agentclient::ConnectOptions o) {
  if (!stream) return {};
  o.attempt_timeout = kHandedOverCheckTimeout;
  return std::async(std::launch::async, [stream = std::move(stream), o]() mutable {
    return agentclient::ConnectAgentOver(std::move(stream), o);
  });
}

Status ConnectAdopted(SandboxVmImpl& vm, agentclient::ConnectOptions o, HandedOver handed_over, AgentPath* path) {
  // Whatever follows, the Check beside the attach is done with first.
  std::optional<Result<agentclient::AgentClientPtr>> over;
  if (handed_over.valid()) over.emplace(handed_over.get());
  hypervisor::Vmm& vmm = vm.vmm();
  if (vmm.state() != hypervisor::VmState::kRunning)
    return FailedPrecondition(fmt::format("VM {} is {}, not running", vm.id(), hypervisor::VmStateName(vmm.state())));
  vsock::VmVsock* v = vm.vsock();
  if (v == nullptr) return Unavailable(fmt::format("VM {}: its vsock host end is gone", vm.id()));
  *path = AgentPath::kDialled;
  if (over) {
    if (over->ok()) {
      vm.SetAgent(std::move(**over));
      *path = AgentPath::kHandedOver;
      return Status::Ok();
    }
    kAdoptLog.Warn("VM {}: the agent stream handed over does not answer ({}); dialling", vm.id(),
                   over->status().ToString());
    *path = AgentPath::kDialledAfterHandedOver;
  }
  o.abort_fd = vmm.exit_fd();
  o.token = vmm.agent_token();
  auto client = agentclient::ConnectAgent([v](milliseconds t) { return v->Dial(guest_abi::kAgentVsockPort, t); }, o);
  if (!client.ok()) return client.status();
  vm.SetAgent(std::move(*client));
  return Status::Ok();
}

// No vm.json: the boot never got past QEMU's start. What it did start (the
// vsock back end, virtiofsd, perhaps QEMU) is still ours to stop.
Result<std::unique_ptr<SandboxVm>> AdoptUnfinishedBoot(const std::string& state_dir, const Status& no_record) {
  Status reaped = hypervisor::ReapUnrecordedQemu(state_dir);
  if (!reaped.ok() && reaped.code() != Code::kNotFound) return reaped.WithContext("adopt VM at " + state_dir);
  const std::string id = state_dir.substr(state_dir.rfind('/') + 1);
  auto vm = std::make_unique<SandboxVmImpl>(id, state_dir);
  AdoptHostEnds(*vm);
  kAdoptLog.Warn("VM {}: its boot never finished ({}); adopted what it started, for stopping", id,
                 reaped.ok() ? "its QEMU was killed" : "no QEMU ran");
  vm->SetAgentError(FailedPrecondition(fmt::format("VM {} never finished booting: {}", id, no_record.message())));
  return std::unique_ptr<SandboxVm>(std::move(vm));
}

}  // namespace

Result<std::unique_ptr<SandboxVm>> SandboxVm::Adopt(const config::Config& config, const std::string& state_dir,
                                                    UniqueFd agent_stream) {
  std::string what = "adopt VM at " + state_dir;
  struct stat st{};
  if (::stat(state_dir.c_str(), &st) != 0) return ErrnoStatus(what);
  const auto t0 = std::chrono::steady_clock::now();
  agentclient::ConnectTimings agent_ms;
  const agentclient::ConnectOptions options =
      AdoptOptions(state_dir, milliseconds(config.runtime.agent_timeout_ms), &agent_ms);
  HandedOver handed_over = CheckHandedOver(std::move(agent_stream), options);
  auto vmm = hypervisor::NewQemuHypervisor(config)->Attach(state_dir);
  if (!vmm.ok() && vmm.status().code() == Code::kNotFound) return AdoptUnfinishedBoot(state_dir, vmm.status());
  if (!vmm.ok()) return vmm.status().WithContext(what);
  auto vm = std::make_unique<SandboxVmImpl>((*vmm)->id(), state_dir);
  vm->SetVmm(std::move(*vmm));
  const auto t_vmm = std::chrono::steady_clock::now();
  AdoptHostEnds(*vm);
  const auto t_ends = std::chrono::steady_clock::now();
  AgentPath path = AgentPath::kDialled;
  Status agent = ConnectAdopted(*vm, options, std::move(handed_over), &path);
  if (agent.ok()) {
    kAdoptLog.Info("adopted VM {} (QEMU pid {}); the agent answers: VMM (lock, vm.json, QMP) {:.1f} ms, vsock and "
                   "virtiofsd {:.1f} ms, agent (dial, token, Check) {:.1f} ms: dial {:.1f} ms, token {:.1f} ms, "
                   "Check {:.1f} ms, {}",
                   vm->id(), vm->vmm_pid(), MsBetween(t0, t_vmm), MsBetween(t_vmm, t_ends), MsSince(t_ends),
                   agent_ms.dial_ms, agent_ms.token_ms, agent_ms.check_ms, AgentPathName(path));
  } else {
    kAdoptLog.Warn("adopted VM {} without an agent: {}", vm->id(), agent.message());
    vm->SetAgentError(std::move(agent).WithContext("adopt VM " + vm->id()));
  }
  return std::unique_ptr<SandboxVm>(std::move(vm));
}

}  // namespace capsule::vm
