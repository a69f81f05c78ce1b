// See bundle_record.h. JSON, so a person can read it while debugging.
#include "shim/task/bundle_record.h"

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"

namespace capsule::shim::task {

std::string BundleRecordToJson(const BundleRecord& r) {
  nlohmann::json j = {{"sandbox_id", r.sandbox_id},
                      {"vm_id", r.vm_id},
                      {"vm_state_dir", r.vm_state_dir},
                      {"container_share_dir", r.container_share_dir},
                      {"config_path", r.config_path}};
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
  return r;
}

Status WriteBundleRecord(const std::string& bundle, const BundleRecord& r) {
  return WriteFileAtomic(bundle + "/" + kBundleRecordFile, BundleRecordToJson(r), 0600);
}

Result<BundleRecord> ReadBundleRecord(const std::string& bundle) {
  const std::string path = bundle + "/" + kBundleRecordFile;
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return BundleRecordFromJson(text, path);
}

}  // namespace capsule::shim::task
