// See agent_handle.h.
#include "shim/pod/agent_handle.h"

namespace capsule::shim::pod {

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

Status AgentHandle::Unanswered(const Status& st) const {
  // The client's message is "agent <Rpc>: deadline exceeded after N ms";
  // the pod goes after the RPC's name.
  std::string msg = st.message();
  if (!pod_.empty()) {
    const size_t colon = msg.find(':');
    const std::string where = " in " + pod_;
    if (msg.rfind("agent ", 0) == 0 && colon != std::string::npos) {
      msg.insert(colon, where);
    } else {
      msg = "agent call" + where + ": " + msg;
    }
  }
  msg += "; the agent is not answering: the pod's VM is stopped and its containers are reported killed";
  if (!unanswered_.exchange(true) && on_unanswered_) on_unanswered_(DeadlineExceeded(msg));
  return DeadlineExceeded(std::move(msg));
}

}  // namespace capsule::shim::pod
