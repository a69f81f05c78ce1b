// See pod_record.h.
#include "runtime/vm/pod_record.h"

#include <sys/stat.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"

namespace capsule::vm {
namespace {

using nlohmann::json;

constexpr size_t kMaxRecordBytes = 16 * 1024;
constexpr size_t kMaxField = 253;  // a DNS subdomain, what Kubernetes names are

std::string PathIn(const std::string& state_dir) { return state_dir + "/" + kPodRecordFile; }

Status FieldError(std::string_view source, const char* key, std::string_view what) {
  return InvalidArgument(std::string(source) + ": field '" + key + "' " + std::string(what));
}

Result<std::string> Str(const json& j, std::string_view source, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return FieldError(source, key, "is missing");
    return std::string();
  }
  if (!it->is_string()) return FieldError(source, key, "is not a string");
  std::string s = it->get<std::string>();
  if (s.size() > kMaxField) return FieldError(source, key, "is longer than 253 bytes");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return FieldError(source, key, "holds a control character");
  return s;
}

Result<double> Number(const json& j, std::string_view source, const char* key, double hi) {
  auto it = j.find(key);
  if (it == j.end()) return FieldError(source, key, "is missing");
  if (!it->is_number()) return FieldError(source, key, "is not a number");
  const double v = it->get<double>();
  if (!(v >= 0 && v <= hi)) return FieldError(source, key, "is out of range");
  return v;
}

}  // namespace

std::string PodRecordToJson(const PodRecord& r) {
  json j = {{"sandbox_id", r.sandbox_id}, {"namespace", r.ns},         {"pod_name", r.pod_name},
            {"pod_namespace", r.pod_namespace}, {"shim_pid", r.shim_pid}, {"started_unix_ms", r.started_unix_ms},
            {"claimed", r.claimed},        {"vm_ms", r.vm_ms},         {"setup_ms", r.setup_ms}};
  return j.dump(2) + "\n";
}

Result<PodRecord> PodRecordFromJson(std::string_view text, std::string_view source) {
  if (text.size() > kMaxRecordBytes) return InvalidArgument(std::string(source) + ": larger than 16 KiB");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument(std::string(source) + ": not a JSON object");
  PodRecord r;
  ASSIGN_OR_RETURN(r.sandbox_id, Str(j, source, "sandbox_id", true));
  if (r.sandbox_id.empty()) return FieldError(source, "sandbox_id", "is empty");
  ASSIGN_OR_RETURN(r.ns, Str(j, source, "namespace", true));
  ASSIGN_OR_RETURN(r.pod_name, Str(j, source, "pod_name", false));
  ASSIGN_OR_RETURN(r.pod_namespace, Str(j, source, "pod_namespace", false));
  ASSIGN_OR_RETURN(double pid, Number(j, source, "shim_pid", std::numeric_limits<pid_t>::max()));
  if (pid < 1 || pid != static_cast<double>(static_cast<pid_t>(pid))) return FieldError(source, "shim_pid", "is not a pid");
  r.shim_pid = static_cast<pid_t>(pid);
  auto started = j.find("started_unix_ms");
  if (started == j.end() || !started->is_number_integer()) return FieldError(source, "started_unix_ms", "is not an integer");
  if (started->is_number_unsigned() ? started->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                                    : started->get<int64_t>() < 0)
    return FieldError(source, "started_unix_ms", "is out of range");
  r.started_unix_ms = started->get<int64_t>();
  auto claimed = j.find("claimed");
  if (claimed == j.end() || !claimed->is_boolean()) return FieldError(source, "claimed", "is not a boolean");
  r.claimed = claimed->get<bool>();
  constexpr double kDay = 86400e3;
  ASSIGN_OR_RETURN(r.vm_ms, Number(j, source, "vm_ms", kDay));
  ASSIGN_OR_RETURN(r.setup_ms, Number(j, source, "setup_ms", kDay));
  return r;
}

Status WritePodRecord(const std::string& state_dir, const PodRecord& record) {
  return WriteFileAtomic(PathIn(state_dir), PodRecordToJson(record), 0600);
}

Result<PodRecord> ReadPodRecord(const std::string& state_dir) {
  const std::string path = PathIn(state_dir);
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return ErrnoStatus("stat " + path);
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " is not a regular file");
  if (static_cast<size_t>(st.st_size) > kMaxRecordBytes) return InvalidArgument(path + ": larger than 16 KiB");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return PodRecordFromJson(text, path);
}

}  // namespace capsule::vm
