// capsule-agent-faults: capsule-agent plus the fault switch, for tests only
// (never installed; its own initrd, capsule-initrd-faults.img). The plan
// comes from capsule.fault= on the guest kernel command line, or from
// --fault SPEC for an agent run with --no-init.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "agent/app/agent.h"
#include "agent/faults/fault_interceptor.h"
#include "runtime/common/logging.h"

namespace {

const capsule::log::Logger kMainLog("fault");

// Removes "--fault SPEC" (or "--fault=SPEC") from argv; its value if any.
std::optional<std::string> TakeFaultFlag(std::vector<char*>& args) {
  std::optional<std::string> spec;
  for (size_t i = 1; i < args.size();) {
    if (std::strcmp(args[i], "--fault") == 0 && i + 1 < args.size()) {
      spec = args[i + 1];
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    } else if (std::strncmp(args[i], "--fault=", 8) == 0) {
      spec = args[i] + 8;
      args.erase(args.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  namespace faults = capsule::agent::faults;
  std::vector<char*> args(argv, argv + argc);
  const std::optional<std::string> flag = TakeFaultFlag(args);
  capsule::agent::app::AgentExtensions ext;
  ext.interceptors = [flag]() -> capsule::agent::server::InterceptorFactories {
    const std::string spec = flag ? *flag : faults::FaultSpecFromCmdline();
    auto plan = faults::FaultPlan::Parse(spec);
    if (!plan.ok()) {
      kMainLog.Error("no fault armed: {}", plan.status().message());
      return {};
    }
    if (plan->empty()) {
      kMainLog.Info("fault switch present, no fault armed");
      return {};
    }
    kMainLog.Warn("fault switch armed: {}", plan->ToString());
    return faults::FaultInterceptors(std::make_shared<faults::FaultPlan>(std::move(*plan)));
  };
  args.push_back(nullptr);
  return capsule::agent::app::RunAgent(static_cast<int>(args.size()) - 1, args.data(), std::move(ext));
}
