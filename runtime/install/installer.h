// Install and Uninstall: the node installer's steps, shared by
// `capsule-runtime install|uninstall` on a host and the DaemonSet
// (deploy/kubernetes/capsule-deploy.yaml) with the node's / as --root.
// Install copies the files of install_plan.h, writes the containerd
// drop-in and imports it, and records all of it in the manifest;
// Uninstall undoes what the manifest says, keeping what was changed since.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/install/install_plan.h"

namespace capsule::install {

struct InstallOptions {
  std::string root = "/";                                        // the node's / (e.g. /host in a pod)
  std::string from;                                              // install tree (prefix) to copy from
  std::string containerd_config = "/etc/containerd/config.toml";  // inside root
  InstallLayout layout;
};

struct InstallReport {
  std::string action;                       // "install" or "uninstall"
  bool containerd_config_changed = false;   // containerd must restart to see it
  std::vector<std::string> written;         // paths inside the root
  std::vector<std::string> unchanged;
  std::vector<std::string> removed;
  std::vector<std::string> kept;            // left in place, with a warning
  std::vector<std::string> warnings;
};

std::string ReportToJson(const InstallReport& r);

Result<InstallReport> Install(const InstallOptions& opts);
Result<InstallReport> Uninstall(const InstallOptions& opts);

}  // namespace capsule::install
