// The one edit the installer makes to the user's containerd config: its
// top-level `imports = [...]` gains (or loses) the path of Capsule's
// drop-in. Everything else in the file stays byte for byte as it was.
//
// How containerd 1.6 reads this (services/server/config/config.go,
// LoadConfig, checked against containerd 1.6.20 with `containerd config
// dump`): the main file is decoded first, then each path of its `imports`
// (relative ones against the main file's directory, `*` globbed, each file
// once) and merged into it with mergeConfig: scalars of a later file
// override, lists append, and the `plugins` map is merged by plugin key
// with the *whole* value replaced. So an imported file that has a
// `[plugins."io.containerd.grpc.v1.cri"...]` table replaces all of the
// main file's CRI settings (Debian's default config sets the CNI bin_dir
// there; kubeadm nodes set SystemdCgroup): dropin.h copies the main file's
// CRI tables into the drop-in for that reason. `version` merges like any
// scalar: a `version = 2` drop-in turns a version-1 main file into a
// version-2 config whose plugin keys ("cri", ...) no longer match and
// whose disabled_plugins fail validation, so the drop-in carries the main
// file's version, never its own. A file without `version` is version 1.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::install {

struct ConfigEdit {
  std::string text;
  bool changed = false;
};

// containerd's config format version of `text`: its top-level `version`,
// 1 when absent. An error names the line of a value that is not 1 or 2.
Result<int> ContainerdConfigVersion(std::string_view text);

// `text` with `path` in its top-level imports: appended to an existing
// array (single- or multi-line), or a new `imports = ["path"]` line after
// the last top-level key (before the first table when there is none).
// Unchanged when `path` is already imported.
Result<ConfigEdit> AddImport(std::string_view text, std::string_view path);

// `text` without `path` in its imports (the whole `imports` line when it
// is exactly the one AddImport writes). Unchanged when it is not there.
Result<ConfigEdit> RemoveImport(std::string_view text, std::string_view path);

// The config written where containerd had none: version 2 and the import.
std::string NewConfigWithImport(std::string_view path);

}  // namespace capsule::install
