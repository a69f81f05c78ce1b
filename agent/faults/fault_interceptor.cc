// See fault_interceptor.h. The hold runs on the gRPC thread that serves the
// call (the agent's server is synchronous), checking every kPollInterval
// whether the call was cancelled (the server's shutdown cancels it) or its
// deadline is well past. Before the handler runs, a client's own deadline
// or cancel does not show in IsCancelled() (measured: a held call with an
// 800 ms deadline stayed "not cancelled"), hence the deadline check.
#include "agent/faults/fault_interceptor.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "agent/config/kernel_cmdline.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::agent::faults {
namespace {

namespace gx = grpc::experimental;
// gRPC's deadlines are wall-clock times; delays are measured on the
// monotonic clock, which time adjustments (an NTP slew) cannot shorten.
using Clock = std::chrono::system_clock;
using Steady = std::chrono::steady_clock;

const log::Logger kFaultInterceptorLog("fault");
constexpr std::chrono::milliseconds kPollInterval{20};
// A held call goes on only once its caller is gone: gRPC may report the
// cancel a little after the deadline the server computed (which runs a
// little ahead of the client's), and an answer sent in between would reach
// a caller that is still waiting.
constexpr std::chrono::milliseconds kPastDeadline{2000};

// "/capsule.agent.v1.Agent/CreateContainer" -> "CreateContainer"
std::string RpcName(const char* method) {
  const std::string m = method != nullptr ? method : "";
  return m.substr(m.rfind('/') + 1);
}

// Holds the calling thread until `until` or until the call is cancelled
// (its client gave up, or the server is shutting down).
template <typename C>
void Hold(grpc::ServerContextBase* ctx, typename C::time_point until) {
  while (C::now() < until && !ctx->IsCancelled()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - C::now());
    std::this_thread::sleep_for(std::clamp(left, std::chrono::milliseconds(1), kPollInterval));
  }
}

class FaultInterceptor final : public gx::Interceptor {
 public:
  FaultInterceptor(gx::ServerRpcInfo* info, std::shared_ptr<FaultPlan> plan)
      : info_(info), plan_(std::move(plan)) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::POST_RECV_MESSAGE)) Apply();
    methods->Proceed();
  }

 private:
  void Apply() {
    const std::string rpc = RpcName(info_->method());
    const std::optional<FaultRule> rule = plan_->Take(rpc);
    if (!rule) return;
    grpc::ServerContextBase* ctx = info_->server_context();
    const auto start = Steady::now();
    if (rule->action == FaultRule::Action::kHang) {
      kFaultInterceptorLog.Warn("fault {}: holding {} until its caller gives up", rule->ToString(), rpc);
      const Clock::time_point deadline = ctx->deadline();
      Hold<Clock>(ctx, deadline >= Clock::time_point::max() - kPastDeadline ? deadline : deadline + kPastDeadline);
    } else {
      kFaultInterceptorLog.Warn("fault {}: holding {} for {} ms", rule->ToString(), rpc, rule->delay.count());
      Hold<Steady>(ctx, start + rule->delay);
    }
    kFaultInterceptorLog.Warn("fault {}: {} goes on after {} ms{}", rule->ToString(), rpc,
                              std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start).count(),
                              ctx->IsCancelled() ? " (its caller gave up)" : "");
  }

  gx::ServerRpcInfo* const info_;
  const std::shared_ptr<FaultPlan> plan_;
};

class FaultInterceptorFactory final : public gx::ServerInterceptorFactoryInterface {
 public:
  explicit FaultInterceptorFactory(std::shared_ptr<FaultPlan> plan) : plan_(std::move(plan)) {}
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new FaultInterceptor(info, plan_);  // gRPC owns and deletes it
  }

 private:
  const std::shared_ptr<FaultPlan> plan_;
};

}  // namespace

server::InterceptorFactories FaultInterceptors(std::shared_ptr<FaultPlan> plan) {
  server::InterceptorFactories out;
  if (!plan || plan->empty()) return out;
  out.push_back(std::make_unique<FaultInterceptorFactory>(std::move(plan)));
  return out;
}

std::string FaultSpecFromCmdline(const std::string& cmdline_path) {
  auto text = ReadFile(cmdline_path);
  if (!text.ok()) return "";
  std::string spec;
  for (const auto& p : config::ParseKernelCmdline(*text)) {
    if (p.key == "capsule.fault" && p.value) spec = *p.value;  // the last one wins, as for the kernel
  }
  return spec;
}

}  // namespace capsule::agent::faults
