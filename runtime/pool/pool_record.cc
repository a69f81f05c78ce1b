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

// Typed field access; every error names the file and the field.
class Fields {
 public:
  Fields(const json& obj, std::string_view source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  Result<const json*> Get(const char* key, json::value_t type) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return Error(key, "is missing");
    const bool ok = type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
    if (!ok) return Error(key, "has the wrong type");
    return &*it;
  }
  // An integer in [lo, hi]: a value outside is refused, not wrapped.
  Result<int64_t> Int(const char* key, int64_t lo, int64_t hi) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, json::value_t::number_integer));
    // nlohmann reads every non-negative literal (0 too) as unsigned: both
    // bounds apply on that side as well.
    const bool in_range = j->is_number_unsigned()
                              ? j->get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                    static_cast<int64_t>(j->get<uint64_t>()) >= lo
                              : j->get<int64_t>() >= lo && j->get<int64_t>() <= hi;
    if (!in_range) return Error(key, "is out of range");
    return j->get<int64_t>();
  }
  Result<std::string> Str(const char* key) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, json::value_t::string));
    return j->get<std::string>();
  }
  Status Error(const char* key, std::string_view what) const {
    return InvalidArgument(std::string(source_) + ": field '" + prefix_ + key + "' " + std::string(what));
  }

 private:
  const json& obj_;
  std::string_view source_;
  std::string prefix_;
};

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

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
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(std::string(source) + ": not a JSON object");
  Fields f(j, source);
  PoolRecord r;
  ASSIGN_OR_RETURN(r.shape_key, f.Str("shape_key"));
  ASSIGN_OR_RETURN(r.created_unix_ms, f.Int("created_unix_ms", 0, kMaxInt64));
  ASSIGN_OR_RETURN(const json* claimed, f.Get("claimed", json::value_t::boolean));
  r.claimed = claimed->get<bool>();
  if (!r.claimed) return r;
  ASSIGN_OR_RETURN(r.sandbox_id, f.Str("sandbox_id"));
  ASSIGN_OR_RETURN(r.claimed_unix_ms, f.Int("claimed_unix_ms", 0, kMaxInt64));
  ASSIGN_OR_RETURN(const json* who, f.Get("claimant", json::value_t::object));
  Fields c(*who, source, "claimant.");
  ASSIGN_OR_RETURN(int64_t pid, c.Int("pid", 1, std::numeric_limits<pid_t>::max()));
  r.claimant.pid = static_cast<pid_t>(pid);
  ASSIGN_OR_RETURN(const json* start, c.Get("start_time", json::value_t::number_unsigned));
  r.claimant.start_time = start->get<uint64_t>();
  ASSIGN_OR_RETURN(r.claimant.boot_id, c.Str("boot_id"));
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
