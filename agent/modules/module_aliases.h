// What the kernel asks a modprobe helper for is often not a module name but
// an alias ("rtnl-link-bridge", "nft-chain-2-nat", "net-pf-16-proto-12",
// "crypto-crc32c"): depmod's modules.alias maps glob patterns to module
// names, and modules.softdep names modules to load first ("softdep
// libcrc32c pre: crc32c"). Both files come from the host's module tree
// (read-only to the guest); lines that do not parse are skipped.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace capsule::agent::modules {

class ModuleAliases {
 public:
  // "alias <pattern> <module>" lines.
  static ModuleAliases Parse(std::string_view modules_alias);

  // Modules whose pattern matches `request` (fnmatch), each once, in file
  // order (normalized names).
  std::vector<std::string> Resolve(std::string_view request) const;
  size_t size() const { return aliases_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> aliases_;  // pattern, module
};

// "softdep <module> pre: a b post: c" -> module -> {a, b} (the pre list; a
// post list is not needed to make the module work).
std::map<std::string, std::vector<std::string>> ParseSoftdepPre(std::string_view modules_softdep);

}  // namespace capsule::agent::modules
