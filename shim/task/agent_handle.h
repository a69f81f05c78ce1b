// AgentHandle: shared, revocable access to a VM's AgentClient. Processes,
// their stdio copy threads and the OOM watcher all call the agent, and some
// of them (a copy thread stuck in a read) can outlive the VM object; they
// hold this handle, never the raw client. Revoke() closes the client, which
// cancels blocked calls, waits for calls in flight to return, and makes
// every later call UNAVAILABLE, so the client can be destroyed safely.
#pragma once

#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"

namespace capsule::shim::task {

class AgentHandle {
 public:
  AgentHandle(agentclient::AgentClient* client, std::string vm_id)
      : client_(client), vm_id_(std::move(vm_id)) {}

  // Runs fn(client) unless revoked (then UNAVAILABLE naming the VM).
  template <typename R>
  R Call(const std::function<R(agentclient::AgentClient&)>& fn) const {
    std::shared_lock lock(mu_);
    if (client_ == nullptr) return Gone();
    return fn(*client_);
  }
  // Idempotent.
  void Revoke();
  bool revoked() const;
  const std::string& vm_id() const { return vm_id_; }

 private:
  Status Gone() const { return Unavailable("the VM " + vm_id_ + " and its agent are gone"); }

  mutable std::shared_mutex mu_;
  agentclient::AgentClient* client_;  // guarded by mu_; null once revoked
  const std::string vm_id_;
};
using AgentHandlePtr = std::shared_ptr<AgentHandle>;

}  // namespace capsule::shim::task
