// AgentHandle: shared, revocable access to a VM's AgentClient. Processes,
// their stdio copy threads and the OOM watcher all call the agent, and some
// of them (a copy thread stuck in a read) can outlive the VM object; they
// hold this handle, never the raw client. Revoke() closes the client, which
// cancels blocked calls, waits for calls in flight to return, and makes
// every later call UNAVAILABLE, so the client can be destroyed safely.
//
// Two kinds of call. Call(): bounded by the client's deadline
// (runtime.agent_timeout_ms); one that runs out of it means the agent is
// hung, so its error names the pod and says so, and the unanswered hook
// (the Sandbox's: stop the VM) runs once. LongPoll(): calls that wait on
// the guest's processes by design (WaitProcess, stdio reads and writes, OOM
// events); their deadline, if any, says nothing about the agent.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"

namespace capsule::shim::pod {

class AgentHandle {
 public:
  // `pod` names the pod in errors ("pod default/web (4f2a...)"); `call_timeout`
  // is the client's deadline of bounded calls.
  AgentHandle(agentclient::AgentClient* client, std::string vm_id, std::string pod = "",
              std::chrono::milliseconds call_timeout = agentclient::kDefaultCallTimeout)
      : client_(client), vm_id_(std::move(vm_id)), pod_(std::move(pod)), call_timeout_(call_timeout) {}

  // Runs fn(client) unless revoked (then UNAVAILABLE naming the VM). A
  // DEADLINE_EXCEEDED after at least the call timeout is the agent not
  // answering: "agent CreateContainer in pod P: deadline exceeded after
  // 30000 ms; the agent is not answering: the pod's VM is stopped", and the
  // unanswered hook runs (once per handle).
  template <typename R>
  R Call(const std::function<R(agentclient::AgentClient&)>& fn) const {
    std::shared_lock lock(mu_);
    if (client_ == nullptr) return Gone();
    const auto start = std::chrono::steady_clock::now();
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    R r = fn(*client_);
    const Status& st = StatusOf(r);
    if (st.code() != Code::kDeadlineExceeded || std::chrono::steady_clock::now() - start < call_timeout_) return r;
    return Unanswered(st);
  }
  // Runs fn(client) unless revoked; any outcome is passed on as it is.
  template <typename R>
  R LongPoll(const std::function<R(agentclient::AgentClient&)>& fn) const {
    std::shared_lock lock(mu_);
    if (client_ == nullptr) return Gone();
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    return fn(*client_);
  }
  // Set once, before the handle is shared. Runs on the calling thread with
  // the handle's shared lock held: it must only start the teardown (a
  // Revoke() from it would deadlock).
  void OnUnanswered(std::function<void(const Status&)> hook) { on_unanswered_ = std::move(hook); }

  // Idempotent.
  void Revoke();
  bool revoked() const;
  // Calls made to the agent so far, of both kinds: what the shim's start
  // paths log as their guest round trips.
  uint64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  // Whether a bounded call ran out of its deadline.
  bool unanswered() const { return unanswered_.load(); }
  const std::string& vm_id() const { return vm_id_; }
  const std::string& pod() const { return pod_; }

 private:
  static const Status& StatusOf(const Status& st) { return st; }
  template <typename T>
  static const Status& StatusOf(const Result<T>& r) {
    return r.status();
  }
  Status Gone() const { return Unavailable("the VM " + vm_id_ + " and its agent are gone"); }
  // The error of a call the agent did not answer in time; fires the hook.
  Status Unanswered(const Status& st) const;

  mutable std::shared_mutex mu_;
  agentclient::AgentClient* client_;  // guarded by mu_; null once revoked
  const std::string vm_id_;
  const std::string pod_;
  const std::chrono::milliseconds call_timeout_;
  std::function<void(const Status&)> on_unanswered_;  // set before sharing
  mutable std::atomic<bool> unanswered_{false};
  mutable std::atomic<uint64_t> round_trips_{0};
};
using AgentHandlePtr = std::shared_ptr<AgentHandle>;

}  // namespace capsule::shim::pod
