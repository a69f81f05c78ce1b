// Manifest <-> JSON (nlohmann_json); unknown keys are ignored so a newer
// installer's manifest still uninstalls with an older one.
#include "runtime/install/manifest.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace capsule::install {

using nlohmann::json;

const ManifestFile* Manifest::Find(std::string_view path) const {
  for (const ManifestFile& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

void Manifest::Put(std::string path, std::string sha256) {
  for (ManifestFile& f : files) {
    if (f.path == path) {
      f.sha256 = std::move(sha256);
      return;
    }
  }
  files.push_back({std::move(path), std::move(sha256)});
}

void Manifest::AddCreatedDirs(const std::vector<std::string>& dirs) {
  for (const std::string& d : dirs) {
    if (std::find(created_dirs.begin(), created_dirs.end(), d) == created_dirs.end()) created_dirs.push_back(d);
  }
}

std::string ManifestToJson(const Manifest& m) {
  json j;
  j["version"] = 1;
  j["files"] = json::array();
  for (const ManifestFile& f : m.files) j["files"].push_back({{"path", f.path}, {"sha256", f.sha256}});
  j["created_dirs"] = m.created_dirs;
  if (m.containerd) {
    const ContainerdRecord& c = *m.containerd;
    j["containerd"] = {{"config", c.config},
                       {"existed", c.existed},
                       {"original_sha256", c.original_sha256},
                       {"original_mode", c.original_mode},
                       {"written_sha256", c.written_sha256},
                       {"dropin", c.dropin},
                       {"dropin_sha256", c.dropin_sha256}};
  }
  return j.dump(2) + "\n";
}

Result<Manifest> ManifestFromJson(std::string_view text, const std::string& what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(what + ": not a JSON object");
  Manifest m;
  try {
    if (j.value("version", 0) != 1) return InvalidArgument(what + ": unknown manifest version");
    for (const json& f : j.at("files")) m.files.push_back({f.at("path").get<std::string>(), f.at("sha256").get<std::string>()});
    m.created_dirs = j.value("created_dirs", std::vector<std::string>{});
    if (j.contains("containerd")) {
      const json& c = j.at("containerd");
      ContainerdRecord r;
      r.config = c.at("config").get<std::string>();
      r.existed = c.at("existed").get<bool>();
      r.original_sha256 = c.at("original_sha256").get<std::string>();
      r.original_mode = c.value("original_mode", 0644);
      r.written_sha256 = c.at("written_sha256").get<std::string>();
      r.dropin = c.at("dropin").get<std::string>();
      r.dropin_sha256 = c.at("dropin_sha256").get<std::string>();
      m.containerd = std::move(r);
    }
  } catch (const json::exception& e) {
    return InvalidArgument(what + ": " + e.what());
  }
  return m;
}

}  // namespace capsule::install
