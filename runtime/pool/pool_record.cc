// See pool_record.h.
#include "runtime/pool/pool_record.h"

#include <time.h>
#include <unistd.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"

namespace capsule::pool {
namespace {

using nlohmann::json;

std::string PathIn(const std::string& state_dir) { return state_dir + "/" + kPoolRecordFile; }

}  // namespace

bool PoolRecord::operator==(const PoolRecord& o) const {
  return shape_key == o.shape_key && created_unix_ms == o.created_unix_ms && claimed == o.claimed &&
         sandbox_id == o.sandbox_id && claimant.pid == o.claimant.pid && claimant.start_time == o.claimant.start_time &&
         claimant.boot_id == o.claimant.boot_id && claimed_unix_ms == o.claimed_unix_ms;
}

int64_t NowUnixMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string PoolRecordToJson(const PoolRecord& r) {
  json j = {{"shape_key", r.shape_key}, {"created_unix_ms", r.created_unix_ms}, {"claimed", r.claimed}};
  if (r.claimed) {
    j["sandbox_id"] = r.sandbox_id;
    j["claimant"] = {{"pid", r.claimant.pid}, {"start_time", r.claimant.start_time}, {"boot_id", r.claimant.boot_id}};
    j["claimed_unix_ms"] = r.claimed_unix_ms;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<PoolRecord> PoolRecordFromJson(std::string_view text, std::string_view source) {
  const std::string path(source);
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  auto field = [&](const char* key, json::value_t type) -> Result<const json*> {
    auto it = j.find(key);
    if (it == j.end()) return InvalidArgument(path + ": field '" + key + "' is missing");
    const bool ok = type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
    if (!ok) return InvalidArgument(path + ": field '" + key + "' has the wrong type");
    return &*it;
  };
  PoolRecord r;
  ASSIGN_OR_RETURN(const json* key, field("shape_key", json::value_t::string));
  ASSIGN_OR_RETURN(const json* created, field("created_unix_ms", json::value_t::number_integer));
  ASSIGN_OR_RETURN(const json* claimed, field("claimed", json::value_t::boolean));
  r.shape_key = key->get<std::string>();
  r.created_unix_ms = created->get<int64_t>();
  r.claimed = claimed->get<bool>();
  if (!r.claimed) return r;
  ASSIGN_OR_RETURN(const json* sandbox, field("sandbox_id", json::value_t::string));
  ASSIGN_OR_RETURN(const json* who, field("claimant", json::value_t::object));
  ASSIGN_OR_RETURN(const json* when, field("claimed_unix_ms", json::value_t::number_integer));
  r.sandbox_id = sandbox->get<std::string>();
  r.claimed_unix_ms = when->get<int64_t>();
  if (!who->contains("pid") || !(*who)["pid"].is_number_integer() || !who->contains("start_time") ||
      !(*who)["start_time"].is_number_unsigned() || !who->contains("boot_id") || !(*who)["boot_id"].is_string())
    return InvalidArgument(path + ": field 'claimant' needs pid, start_time and boot_id");
  r.claimant.pid = (*who)["pid"].get<pid_t>();
  r.claimant.start_time = (*who)["start_time"].get<uint64_t>();
  r.claimant.boot_id = (*who)["boot_id"].get<std::string>();
  return r;
}

Status WritePoolRecord(const std::string& state_dir, const PoolRecord& r) {
  return WriteFileAtomic(PathIn(state_dir), PoolRecordToJson(r), 0600);
}

Result<PoolRecord> ReadPoolRecord(const std::string& state_dir) {
  const std::string path = PathIn(state_dir);
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return PoolRecordFromJson(text, path);
}

Status RemovePoolRecord(const std::string& state_dir) {
  const std::string path = PathIn(state_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove " + path);
  return Status::Ok();
}

}  // namespace capsule::pool
