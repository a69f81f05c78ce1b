// JSON codec for vsock.json, written atomically so an adopter never reads a
// half-written file.
#include "runtime/vsock/vsock_state.h"

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/vsock/vsock_backend.h"

namespace capsule::vsock {

Status WriteVsockState(const std::string& vm_dir, const VsockState& s) {
  nlohmann::json j;
  j["backend"] = std::string(config::VsockBackendName(s.backend));
  j["guest_cid"] = s.guest_cid;
  j["device_id"] = s.device_id;
  if (s.backend != config::VsockBackendKind::kVhost) {
    j["vsockd_pid"] = s.vsockd_pid;
    if (s.backend == config::VsockBackendKind::kSerial)
      j["serial_socket"] = s.serial_socket;
    else
      j["vhost_user_socket"] = s.vhost_user_socket;
    j["hybrid_socket"] = s.hybrid_socket;
  }
  return WriteFileAtomic(vm_dir + "/" + kStateFile, j.dump(2) + "\n", 0600, Durability::kVolatile);
}

Result<VsockState> ReadVsockState(const std::string& vm_dir) {
  std::string path = vm_dir + "/" + kStateFile;
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  auto str = [&](const char* key) -> Result<std::string> {
    if (!j.contains(key) || !j[key].is_string()) return InvalidArgument(path + ": missing string '" + key + "'");
    return j[key].get<std::string>();
  };
  auto num = [&](const char* key) -> Result<uint64_t> {
    if (!j.contains(key) || !j[key].is_number_unsigned())
      return InvalidArgument(path + ": missing unsigned number '" + key + "'");
    return j[key].get<uint64_t>();
  };
  VsockState s;
  ASSIGN_OR_RETURN(std::string backend, str("backend"));
  if (backend == config::VsockBackendName(config::VsockBackendKind::kVhost)) {
    s.backend = config::VsockBackendKind::kVhost;
  } else if (backend == config::VsockBackendName(config::VsockBackendKind::kVhostUser)) {
    s.backend = config::VsockBackendKind::kVhostUser;
  } else if (backend == config::VsockBackendName(config::VsockBackendKind::kSerial)) {
    s.backend = config::VsockBackendKind::kSerial;
  } else {
    return InvalidArgument(path + ": backend '" + backend + "' is not vhost, vhost-user or serial");
  }
  ASSIGN_OR_RETURN(s.guest_cid, num("guest_cid"));
  ASSIGN_OR_RETURN(s.device_id, str("device_id"));
  if (s.backend != config::VsockBackendKind::kVhost) {
    ASSIGN_OR_RETURN(uint64_t pid, num("vsockd_pid"));
    s.vsockd_pid = static_cast<pid_t>(pid);
    if (s.backend == config::VsockBackendKind::kSerial) {
      ASSIGN_OR_RETURN(s.serial_socket, str("serial_socket"));
    } else {
      ASSIGN_OR_RETURN(s.vhost_user_socket, str("vhost_user_socket"));
    }
    ASSIGN_OR_RETURN(s.hybrid_socket, str("hybrid_socket"));
  }
  return s;
}

}  // namespace capsule::vsock
