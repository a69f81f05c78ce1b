// Field checks shared by the container handlers.
#include "agent/containers/validate.h"

#include <fmt/format.h>

#include <algorithm>

namespace capsule::agent::containers {
Status CheckExecId(std::string_view field, const std::string& id, bool allow_init) {
  if (id.empty() && allow_init) return Status::Ok();
  if (id.empty()) return InvalidArgument(fmt::format("{} is required (the init goes with its container)", field));
  return pod::CheckId(field, id);
}

Status CheckProcessTarget(const std::string& container_id, const std::string& exec_id, bool allow_init) {
  if (container_id.empty()) {
    if (exec_id.empty()) return InvalidArgument("exec_id is required for a guest process (container_id \"\")");
    return pod::CheckId("exec_id", exec_id);
  }
  RETURN_IF_ERROR(pod::CheckId("container_id", container_id));
  return CheckExecId("exec_id", exec_id, allow_init);
}

Status CheckSignal(uint32_t signal) {
  if (signal > kMaxSignal) return InvalidArgument(fmt::format("signal {} is not 0..{}", signal, kMaxSignal));
  return Status::Ok();
}

Status CheckWinSize(uint32_t row, uint32_t column) {
  if (row > kMaxWinSize) return InvalidArgument(fmt::format("row {} is more than {}", row, kMaxWinSize));
  if (column > kMaxWinSize) return InvalidArgument(fmt::format("column {} is more than {}", column, kMaxWinSize));
  return Status::Ok();
}

size_t ReadLen(uint32_t len) { return len == 0 ? kDefaultReadLen : std::min(len, kMaxReadLen); }

}  // namespace capsule::agent::containers
