// What `capsule-runtime install` puts on a node: the files of an install
// tree (`make install`'s layout under a prefix) mapped to the same layout
// under /usr/local in the target root, plus where the installer's own
// files live. containerd 1.6's CRI ignores runtime_path, so the shim must
// be on containerd's PATH: /usr/local/bin is on systemd's default PATH.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::install {

struct InstallLayout {
  std::string prefix = "/usr/local";                            // bin/, share/capsule/ under it
  std::string capsule_config = "/etc/capsule/config.yaml";      // the shim's ConfigPath
  std::string dropin = "/etc/capsule/containerd-runtime.toml";  // what containerd imports
  std::string state_dir = "/var/lib/capsule/install";           // manifest, saved config
  std::string Manifest() const { return state_dir + "/manifest.json"; }
  std::string SavedConfig() const { return state_dir + "/containerd-config.orig"; }
};

struct PlannedFile {
  std::string source;          // in the install tree, on this machine
  std::string target;          // absolute, inside the target root
  mode_t mode = 0644;
  bool keep_existing = false;  // an admin's file there wins (config.yaml)
};

// The files to copy from the install tree `from` (a prefix: from/bin,
// from/share/capsule). An error names each missing file.
Result<std::vector<PlannedFile>> PlanFiles(const std::string& from, const InstallLayout& layout);

// The install tree this binary runs from: <dir of /proc/self/exe>/..
Result<std::string> DefaultFromDir();

}  // namespace capsule::install
