// See bundle_record.h. JSON, so a person can read it while debugging.
#include "shim/launcher/bundle_record.h"

#include <sys/types.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"

namespace capsule::shim::launcher {
namespace {

// An absolute path without NUL bytes or "." and ".." parts: `delete` runs as
// root and acts on these, so a record must not lead it anywhere else.
bool IsCleanAbsolute(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.find('\0') != std::string_view::npos) return false;
  for (size_t start = 1; start <= p.size();) {
    size_t end = std::min(p.find('/', start), p.size());
    std::string_view part = p.substr(start, end - start);
    if (part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// The container id part of <vm_state_dir>/mounts/<id>.
bool IsOneComponent(std::string_view c) {
  return !c.empty() && c != "." && c != ".." && c.find('/') == std::string_view::npos &&
         c.find('\0') == std::string_view::npos;
}

// The dirs are the ones the shim writes (task_manager.cc): the VM's state
// dir, and this container's dir under its mounts/. `delete` unmounts and
// removes the latter.
Status Validate(const BundleRecord& r, const std::string& path) {
  if (!r.vm_state_dir.empty() && !IsCleanAbsolute(r.vm_state_dir))
    return InvalidArgument(path + ": vm_state_dir '" + r.vm_state_dir +
                           "' is not an absolute path without '.' or '..' parts");
  if (r.container_share_dir.empty()) return Status::Ok();
  const std::string mounts = r.vm_state_dir + "/mounts/";
  if (r.vm_state_dir.empty() || r.container_share_dir.rfind(mounts, 0) != 0 ||
      !IsOneComponent(std::string_view(r.container_share_dir).substr(mounts.size())))
    return InvalidArgument(path + ": container_share_dir '" + r.container_share_dir + "' is not a directory in " +
                           (r.vm_state_dir.empty() ? std::string("a VM's mounts/") : mounts));
  return Status::Ok();
}

}  // namespace

std::string BundleRecordToJson(const BundleRecord& r) {
  nlohmann::json j = {{"sandbox_id", r.sandbox_id},
                      {"vm_id", r.vm_id},
                      {"vm_state_dir", r.vm_state_dir},
                      {"container_share_dir", r.container_share_dir},
                      {"config_path", r.config_path}};
  if (r.shim_pid > 0)
    j["shim"] = {{"pid", r.shim_pid}, {"start_time", r.shim_start_time}, {"boot_id", r.shim_boot_id}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<BundleRecord> BundleRecordFromJson(std::string_view text, std::string_view source) {
  const std::string path(source);
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument(path + ": not a JSON object");
  BundleRecord r;
  for (auto [key, field] : {std::pair{"sandbox_id", &r.sandbox_id}, std::pair{"vm_id", &r.vm_id},
                            std::pair{"vm_state_dir", &r.vm_state_dir},
                            std::pair{"container_share_dir", &r.container_share_dir},
                            std::pair{"config_path", &r.config_path}}) {
    if (j.contains(key) && !j[key].is_string()) return InvalidArgument(path + ": " + key + " must be a string");
    *field = j.value(key, "");
  }
  if (j.contains("shim")) {
    const nlohmann::json& shim = j["shim"];
    if (!shim.is_object() || !shim.contains("pid") || !shim["pid"].is_number_integer() ||
        shim["pid"].get<int64_t>() <= 0 || shim["pid"].get<int64_t>() > std::numeric_limits<pid_t>::max() ||
        !shim.contains("start_time") || !shim["start_time"].is_number_unsigned() || !shim.contains("boot_id") ||
        !shim["boot_id"].is_string())
      return InvalidArgument(path + ": shim must be {pid: 1..pid_max, start_time: unsigned, boot_id: string}");
    r.shim_pid = shim["pid"].get<int64_t>();
    r.shim_start_time = shim["start_time"].get<uint64_t>();
    r.shim_boot_id = shim["boot_id"].get<std::string>();
  }
  RETURN_IF_ERROR(Validate(r, path));
  return r;
}

Status WriteBundleRecord(const std::string& bundle, const BundleRecord& r) {
  return WriteFileAtomic(bundle + "/" + kBundleRecordFile, BundleRecordToJson(r), 0600, Durability::kVolatile);
}

Result<BundleRecord> ReadBundleRecord(const std::string& bundle) {
  const std::string path = bundle + "/" + kBundleRecordFile;
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return BundleRecordFromJson(text, path);
}

}  // namespace capsule::shim::launcher
