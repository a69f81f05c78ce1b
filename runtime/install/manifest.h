// The install manifest (<root>/var/lib/capsule/install/manifest.json):
// every file install wrote with its sha256, the directories it created,
// and what it did to containerd's config, so uninstall undoes exactly that.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::install {

struct ManifestFile {
  std::string path;    // inside the target root
  std::string sha256;  // of what install wrote
};

struct ContainerdRecord {
  std::string config;           // containerd's main config file
  bool existed = false;         // false: install created it
  std::string original_sha256;  // of the saved original (existed only)
  int original_mode = 0644;
  std::string written_sha256;   // of the main file as install left it
  std::string dropin;           // the imported drop-in
  std::string dropin_sha256;
};

struct Manifest {
  std::vector<ManifestFile> files;
  std::vector<std::string> created_dirs;  // outermost first
  std::optional<ContainerdRecord> containerd;

  const ManifestFile* Find(std::string_view path) const;
  void Put(std::string path, std::string sha256);
  void AddCreatedDirs(const std::vector<std::string>& dirs);
};

std::string ManifestToJson(const Manifest& m);
// `what` names the file in errors.
Result<Manifest> ManifestFromJson(std::string_view text, const std::string& what);

}  // namespace capsule::install
