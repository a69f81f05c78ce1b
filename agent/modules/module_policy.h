// Which modules the guest kernel may load on demand. Any process in the
// guest can make the kernel ask for a module (socket(AF_ALG), a tty line
// discipline, a netlink family), and the rare protocol families are where
// kernel privilege escalations keep being found, so the modprobe helper
// loads only modules a pod plausibly needs: netfilter, bridges and tunnels,
// IPVS, traffic control, overlay. The operator adds patterns with config
// guest.modules_allow (kernel option capsule.modules_allow). A module's
// dependencies and softdeps come with it whatever their names.
//
// PID 1 writes the policy to kModulePolicyFile at boot; the helper, which
// the kernel starts afresh for every request, reads it there. Containers
// do not see PID 1's root.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::modules {

inline constexpr const char* kModulePolicyFile = "/run/capsule/modules.allow";

class ModulePolicy {
 public:
  // The built-in patterns.
  static ModulePolicy Default();
  // The built-in patterns and `extra` (each valid per guest_abi).
  static ModulePolicy WithExtra(const std::vector<std::string>& extra);
  // One pattern a line; blank lines, '#' comments and invalid lines skipped.
  static ModulePolicy FromText(std::string_view text);

  // Whether `module` (a name, '-' or '_') matches a pattern.
  bool Allows(std::string_view module) const;
  std::string ToText() const;
  size_t size() const { return patterns_.size(); }

 private:
  explicit ModulePolicy(std::vector<std::string> patterns);
  std::vector<std::string> patterns_;  // '-' written as '_'
};

// PID 1 at boot.
Status WriteModulePolicy(const ModulePolicy& policy, const std::string& path = kModulePolicyFile);
// The helper: the file's policy, or the built-in one when the file is
// missing or unreadable (never "everything").
ModulePolicy ReadModulePolicy(const std::string& path = kModulePolicyFile);

}  // namespace capsule::agent::modules
