// See pool_record.h.
#include "runtime/pool/pool_record.h"

#include <time.h>
#include <unistd.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/json_field.h"

namespace capsule::pool {
namespace {

using nlohmann::json;

std::string PathIn(const std::string& state_dir) { return state_dir + "/" + kPoolRecordFile; }

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

Result<PoolRecord> ReadRecord(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseJson(text, "pool record"));
  JsonField f(&j, "");
  RETURN_IF_ERROR(f.ExpectObject());
  PoolRecord r;
  RETURN_IF_ERROR(Required(f, "shape_key", &r.shape_key));
  RETURN_IF_ERROR(RequiredInRange(f, "created_unix_ms", 0, kMaxInt64, &r.created_unix_ms));
  RETURN_IF_ERROR(Required(f, "claimed", &r.claimed));
  if (!r.claimed) return r;
  RETURN_IF_ERROR(Required(f, "sandbox_id", &r.sandbox_id));
  RETURN_IF_ERROR(RequiredInRange(f, "claimed_unix_ms", 0, kMaxInt64, &r.claimed_unix_ms));
  JsonField c = f["claimant"];
  RETURN_IF_ERROR(c.ExpectObject());
  int64_t pid = 0;
  RETURN_IF_ERROR(RequiredInRange(c, "pid", 1, std::numeric_limits<pid_t>::max(), &pid));
  r.claimant.pid = static_cast<pid_t>(pid);
  RETURN_IF_ERROR(Required(c, "start_time", &r.claimant.start_time));
  RETURN_IF_ERROR(Required(c, "boot_id", &r.claimant.boot_id));
  return r;
}

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
  auto r = ReadRecord(text);
  if (!r.ok()) return r.status().WithContext(source);
  return r;
}

Status WritePoolRecord(const std::string& state_dir, const PoolRecord& r) {
  return WriteFileAtomic(PathIn(state_dir), PoolRecordToJson(r), 0600, Durability::kVolatile);
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
