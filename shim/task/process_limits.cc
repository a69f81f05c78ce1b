#include "shim/task/process_limits.h"

#include <fmt/format.h>

namespace capsule::shim::task {
namespace {

Result<size_t> StringArrayBytes(const nlohmann::json& process, const char* key, std::string_view what) {
  if (!process.contains(key) || process[key].is_null()) return size_t{0};
  const nlohmann::json& list = process[key];
  if (!list.is_array()) return InvalidArgument(fmt::format("{}.{}: must be an array of strings", what, key));
  size_t total = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) return InvalidArgument(fmt::format("{}.{}[{}]: must be a string", what, key, i));
    const size_t n = list[i].get_ref<const std::string&>().size() + 1;  // exec counts the NUL
    if (n > kMaxProcessStringBytes)
      return InvalidArgument(fmt::format("{}.{}[{}]: {} bytes, over the {} one exec argument may have", what, key, i,
                                         n, kMaxProcessStringBytes));
    total += n + sizeof(char*);  // and a pointer per string
  }
  return total;
}

}  // namespace

Status CheckProcessLimits(const nlohmann::json& process, std::string_view what) {
  if (!process.is_object()) return InvalidArgument(fmt::format("{}: must be an object", what));
  ASSIGN_OR_RETURN(size_t args, StringArrayBytes(process, "args", what));
  ASSIGN_OR_RETURN(size_t env, StringArrayBytes(process, "env", what));
  if (args + env > kMaxProcessArgvEnvBytes)
    return InvalidArgument(fmt::format("{}: args and env take {} bytes ({} + {}), over the {} an exec may carry", what,
                                       args + env, args, env, kMaxProcessArgvEnvBytes));
  return Status::Ok();
}

}  // namespace capsule::shim::task
