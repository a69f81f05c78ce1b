#include "runtime/vm/vm_agent.h"

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {

using std::chrono::milliseconds;

Result<agentclient::AgentClientPtr> ConnectVmAgent(const std::string& state_dir, milliseconds timeout,
                                                   std::optional<milliseconds> call_timeout,
                                                   std::optional<milliseconds> signal_call_timeout) {
  hypervisor::VmPaths paths(state_dir);
  ASSIGN_OR_RETURN(std::string text, ReadFile(paths.record()));
  ASSIGN_OR_RETURN(hypervisor::VmRecord record, hypervisor::VmRecordFromJson(text, paths.record()));
  ASSIGN_OR_RETURN(vsock::VmVsockPtr host_end, vsock::AdoptVmVsock(state_dir));
  vsock::VmVsock* raw = host_end.get();
  agentclient::ConnectOptions o;
  o.deadline = timeout;
  o.attempt_timeout = timeout;
  o.default_call_timeout = call_timeout.value_or(timeout);
  o.signal_call_timeout = signal_call_timeout;
  o.token = record.spec.agent_token;
  auto agent = agentclient::ConnectAgent([raw](milliseconds t) { return raw->Dial(guest_abi::kAgentVsockPort, t); }, o);
  host_end->Detach();  // the VM's owner runs it; we only dialled through it
  return agent;
}

}  // namespace capsule::vm
