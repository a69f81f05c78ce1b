// One write per controller, so one the kernel refuses is named in the error
// instead of failing the whole "+a +b +c" line.
#include "agent/init/cgroups.h"

#include <algorithm>
#include <fmt/format.h>
#include <sstream>

#include "runtime/common/file_util.h"

namespace capsule::agent::init {

std::vector<std::string> DefaultControllers() { return {"cpu", "cpuset", "io", "memory", "pids"}; }

Result<ControllerReport> EnableControllers(const std::string& root, const std::vector<std::string>& wanted) {
  ASSIGN_OR_RETURN(std::string available_text, ReadFile(root + "/cgroup.controllers"));
  std::vector<std::string> available;
  std::istringstream in(available_text);
  for (std::string c; in >> c;) available.push_back(c);
  ControllerReport report;
  for (const auto& c : wanted) {
    if (std::find(available.begin(), available.end(), c) == available.end()) {
      report.unavailable.push_back(c);
      continue;
    }
    Status st = WriteFile(root + "/cgroup.subtree_control", "+" + c);
    if (!st.ok()) return std::move(st).WithContext(fmt::format("enable cgroup controller {}", c));
    report.enabled.push_back(c);
  }
  return report;
}

}  // namespace capsule::agent::init
