// See agent_handle.h.
#include "shim/task/agent_handle.h"

namespace capsule::shim::task {

void AgentHandle::Revoke() {
  agentclient::AgentClient* client;
  {
    std::shared_lock lock(mu_);
    client = client_;
  }
  if (client == nullptr) return;
  // Close first, without the lock: it cancels the blocking calls (reads,
  // waits) that hold the shared lock, so the exclusive lock below comes.
  client->Close();
  std::unique_lock lock(mu_);
  client_ = nullptr;
}

bool AgentHandle::revoked() const {
  std::shared_lock lock(mu_);
  return client_ == nullptr;
}

}  // namespace capsule::shim::task
