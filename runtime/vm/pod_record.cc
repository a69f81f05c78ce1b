// See pod_record.h.
#include "runtime/vm/pod_record.h"

#include <sys/stat.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/json_field.h"
#include "runtime/common/reasons.h"

namespace capsule::vm {
namespace {

using nlohmann::json;

constexpr size_t kMaxRecordBytes = 16 * 1024;
constexpr size_t kMaxField = 253;  // a DNS subdomain, what Kubernetes names are

std::string PathIn(const std::string& state_dir) { return state_dir + "/" + kPodRecordFile; }

// A name field: at most a DNS subdomain's length, no control characters
// (`ps` prints it).
Status ReadName(const JsonField& parent, std::string_view key, bool required, std::string* out) {
  JsonField f = parent[key];
  if (f.null()) return required ? f.Error("required") : Status::Ok();
  RETURN_IF_ERROR(f.Read(out));
  if (out->size() > kMaxField) return f.Error("is longer than 253 bytes");
  for (unsigned char c : *out)
    if (c < 0x20 || c == 0x7f) return f.Error("holds a control character");
  return Status::Ok();
}

// A duration in ms, at most a day.
Status ReadMs(const JsonField& parent, std::string_view key, double* out) {
  constexpr double kDay = 86400e3;
  RETURN_IF_ERROR(Required(parent, key, out));
  if (!(*out >= 0 && *out <= kDay)) return parent[key].Error("is out of range");
  return Status::Ok();
}

Result<PodRecord> ReadRecord(std::string_view text) {
  if (text.size() > kMaxRecordBytes) return InvalidArgument("larger than 16 KiB");
  ASSIGN_OR_RETURN(json j, ParseJson(text, "pod record"));
  JsonField f(&j, "");
  RETURN_IF_ERROR(f.ExpectObject());
  PodRecord r;
  RETURN_IF_ERROR(ReadName(f, "sandbox_id", true, &r.sandbox_id));
  if (r.sandbox_id.empty()) return f["sandbox_id"].Error("is empty");
  RETURN_IF_ERROR(ReadName(f, "namespace", true, &r.ns));
  RETURN_IF_ERROR(ReadName(f, "pod_name", false, &r.pod_name));
  RETURN_IF_ERROR(ReadName(f, "pod_namespace", false, &r.pod_namespace));
  int64_t pid = 0;
  RETURN_IF_ERROR(RequiredInRange(f, "shim_pid", 1, std::numeric_limits<pid_t>::max(), &pid));
  r.shim_pid = static_cast<pid_t>(pid);
  RETURN_IF_ERROR(RequiredInRange(f, "started_unix_ms", 0, std::numeric_limits<int64_t>::max(), &r.started_unix_ms));
  RETURN_IF_ERROR(Required(f, "claimed", &r.claimed));
  RETURN_IF_ERROR(ReadMs(f, "vm_ms", &r.vm_ms));
  RETURN_IF_ERROR(ReadMs(f, "setup_ms", &r.setup_ms));
  return r;
}

}  // namespace

std::string PodRecordToJson(const PodRecord& r) {
  json j = {{"sandbox_id", r.sandbox_id}, {"namespace", r.ns},         {"pod_name", r.pod_name},
            {"pod_namespace", r.pod_namespace}, {"shim_pid", r.shim_pid}, {"started_unix_ms", r.started_unix_ms},
            {"claimed", r.claimed},        {"vm_ms", r.vm_ms},         {"setup_ms", r.setup_ms}};
  return j.dump(2) + "\n";
}

Result<PodRecord> PodRecordFromJson(std::string_view text, std::string_view source) {
  auto r = ReadRecord(text);
  if (!r.ok()) return r.status().WithContext(source);
  return r;
}

Status WritePodRecord(const std::string& state_dir, const PodRecord& record) {
  return WriteFileAtomic(PathIn(state_dir), PodRecordToJson(record), 0600, Durability::kVolatile);
}

Result<PodRecord> ReadPodRecord(const std::string& state_dir) {
  const std::string path = PathIn(state_dir);
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return ErrnoStatus("stat " + path);
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " is not a regular file").WithReason(reason::kWrongFileType);
  if (static_cast<size_t>(st.st_size) > kMaxRecordBytes) return InvalidArgument(path + ": larger than 16 KiB");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return PodRecordFromJson(text, path);
}

}  // namespace capsule::vm
