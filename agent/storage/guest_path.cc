// Path validation shared by the storage code and the RPC handlers.
#include "agent/storage/guest_path.h"

#include <fmt/format.h>
#include <limits.h>

namespace capsule::agent::storage {

Status CheckAbsolutePath(std::string_view field, std::string_view path) {
  if (path.empty()) return InvalidArgument(fmt::format("{} is empty", field));
  if (path.front() != '/') return InvalidArgument(fmt::format("{} '{}' is not an absolute path", field, path));
  if (path.size() >= PATH_MAX) {
    return InvalidArgument(fmt::format("{} is {} bytes long, at most {}", field, path.size(), PATH_MAX - 1));
  }
  if (path.find('\0') != std::string_view::npos) return InvalidArgument(fmt::format("{} contains a NUL byte", field));
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") {
      return InvalidArgument(fmt::format("{} '{}' contains '..'", field, path));
    }
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace capsule::agent::storage
