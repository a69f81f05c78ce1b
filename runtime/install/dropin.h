// The drop-in file containerd imports for Capsule: the `capsule` runtime
// handler of the CRI plugin (deploy/containerd/capsule-runtime.toml's
// content), in the main config's format version, preceded by a verbatim
// copy of the main config's CRI plugin tables, because containerd 1.6
// replaces a plugin's whole table with an imported file's (see
// containerd_imports.h). The copy is refreshed by every install.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::install {

inline constexpr std::string_view kRuntimeType = "io.containerd.capsule.v2";
inline constexpr std::string_view kHandlerName = "capsule";

struct DropinInput {
  std::string_view main_text;        // the user's config ("" when it had none)
  std::string main_path;             // as containerd sees it, for the comment
  int version = 2;                   // ContainerdConfigVersion(main_text)
  std::string capsule_config_path;   // ConfigPath option, e.g. /etc/capsule/config.yaml
};

// The drop-in's text. Errors (naming the main file's line) when the main
// file sets CRI options in a form that cannot be copied table by table
// (dotted keys or inline tables under `plugins`), or already defines a
// `capsule` runtime.
Result<std::string> BuildDropin(const DropinInput& in);

// The CRI plugin's key under `plugins` in a config of `version`.
std::string_view CriPluginKey(int version);

}  // namespace capsule::install
