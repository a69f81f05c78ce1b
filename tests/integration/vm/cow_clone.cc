#include "tests/integration/vm/cow_clone.h"

#include <fcntl.h>

#include "runtime/agentclient/grpc_agent_client.h"
#include "runtime/common/agent_auth.h"
#include "runtime/common/file_util.h"
#include "runtime/common/guest_abi.h"
#include "runtime/hypervisor/qemu_hypervisor.h"

namespace capsule::vm::testing {

using std::chrono::milliseconds;

Status CowClone::Stop() {
  if (agent) agent->Close();
  agent.reset();
  Status s;
  if (vm) s = vm->Stop(milliseconds(0));
  vm.reset();
  if (port) {
    Status p = port->Shutdown(milliseconds(2000));
    if (s.ok()) s = p;
  }
  port.reset();
  if (!dir.empty()) {
    Status r = RemoveAll(dir);
    if (s.ok()) s = r;
  }
  dir.clear();
  return s;
}

Result<CowClone> LaunchCowClone(const config::Config& config, const VmTemplate& tpl, const std::string& state_dir,
                                const std::string& id) {
  CowClone c;
  c.dir = state_dir + "/vm/" + id;
  RETURN_IF_ERROR(MkdirAll(c.dir, 0700));
  ASSIGN_OR_RETURN(vsock::VsockBackendPtr backend, vsock::MakeVsockBackend(config::VsockBackendKind::kSerial));
  ASSIGN_OR_RETURN(c.port, backend->Prepare(vsock::VmVsockSpec{c.dir, 0, "vsock0"}));
  hypervisor::VmSpec s;
  s.id = id;
  s.state_dir = c.dir;
  s.vcpus = tpl.vcpus;
  s.memory_mib = tpl.memory_mib;
  s.kernel = config.guest.kernel;
  s.initrd = config.guest.initrd;
  s.kernel_cmdline = std::string(guest_abi::kBaseKernelCmdline) + " " + std::string(guest_abi::kSerialVsockParam);
  s.memory_file = tpl.ram_path();
  s.memory_private = true;
  s.incoming = true;
  s.vmgenid = true;
  s.hotplug_slots = tpl.hotplug_slots;
  ASSIGN_OR_RETURN(std::string token, agent_auth::NewToken());
  s.agent_token = token;
  if (!tpl.boot_nic_mac.empty())
    s.devices.push_back(hypervisor::NetDevice{"netboot", "tap_" + id.substr(0, 11), tpl.boot_nic_mac, ""});
  s.devices.push_back(hypervisor::VsockDevice{"vsock0", hypervisor::VsockDevice::Backend::kSerial, 3,
                                              c.port->qemu_device().chardev_path});
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(c.vm, hypervisor::NewQemuHypervisor(config)->Launch(s));
  UniqueFd state(::open(tpl.state_path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!state) return ErrnoStatus("open " + tpl.state_path());
  RETURN_IF_ERROR(c.vm->LoadState(state.get(), milliseconds(30000)));
  RETURN_IF_ERROR(c.vm->Resume());
  ASSIGN_OR_RETURN(UniqueFd stream, c.port->Dial(guest_abi::kAgentVsockPort, milliseconds(10000)));
  RETURN_IF_ERROR(agent_auth::Prove(stream.get(), token, milliseconds(10000)));
  c.agent = agentclient::NewGrpcAgentClient(std::move(stream), {});
  RETURN_IF_ERROR(c.agent->Check(milliseconds(10000)).status());
  c.to_agent_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

}  // namespace capsule::vm::testing
