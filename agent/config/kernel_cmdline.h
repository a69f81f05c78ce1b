// Splits a kernel command line (/proc/cmdline) into key[=value] words the way
// the kernel's own parser (lib/cmdline.c next_arg) does: whitespace separates,
// double quotes group, and "--" ends the kernel's part (the rest is init's).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::agent::config {

struct KernelParam {
  std::string key;
  std::optional<std::string> value;  // nullopt for a bare word ("quiet")

  bool operator==(const KernelParam&) const = default;
};

std::vector<KernelParam> ParseKernelCmdline(std::string_view cmdline);

}  // namespace capsule::agent::config
