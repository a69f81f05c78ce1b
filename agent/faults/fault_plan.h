// FaultPlan: which capsule.agent.v1.Agent RPCs the test build of the agent
// (capsule-agent-faults) makes misbehave, from capsule.fault=SPEC on the
// guest kernel command line (a test's hypervisor.kernel_params):
//   SPEC := RULE[,RULE...]
//   RULE := RPC:ACTION[:once][:skip=N]      ACTION := hang | delay=MS
// RPC is the method's name (CreateContainer, StartContainer, ...). hang: the
// call is held before its handler runs until the caller has given up (2 s
// past its deadline, or at the server's shutdown), so the host sees an
// agent that never answers; a call without a deadline is held for good.
// delay=MS: the handler runs MS milliseconds late. skip=N: the first N
// calls of that RPC run normally (a pod's second app container, say).
// once: only the first call after those; else every one.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::faults {

struct FaultRule {
  enum class Action { kHang, kDelay };
  std::string rpc;
  Action action = Action::kHang;
  std::chrono::milliseconds delay{0};  // kDelay only
  bool once = false;
  uint32_t skip = 0;

  // "CreateContainer:hang:skip=1", "StartContainer:delay=4000:once"
  std::string ToString() const;
};

class FaultPlan {
 public:
  // INVALID_ARGUMENT naming the rule that is wrong.
  static Result<FaultPlan> Parse(std::string_view spec);
  FaultPlan() = default;
  FaultPlan(FaultPlan&& other) noexcept
      : rules_(std::move(other.rules_)), spent_(std::move(other.spent_)), passed_(std::move(other.passed_)) {}

  // The rule for this call of `rpc` ("CreateContainer"); a once-rule is
  // used up by the call that gets it. Thread-safe.
  std::optional<FaultRule> Take(std::string_view rpc);
  bool empty() const { return rules_.empty(); }
  std::string ToString() const;

 private:
  std::mutex mu_;
  std::vector<FaultRule> rules_;
  std::vector<bool> spent_;       // guarded by mu_
  std::vector<uint32_t> passed_;  // guarded by mu_: calls let through by skip=N
};

}  // namespace capsule::agent::faults
