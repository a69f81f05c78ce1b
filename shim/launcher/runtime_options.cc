// Decoding containerd's runtime options Any.
#include "shim/launcher/runtime_options.h"

#include <unistd.h>

#include <google/protobuf/any.pb.h>

#include "containerd/runtimeoptions/v1/api.pb.h"

namespace capsule::shim::launcher {
namespace {

constexpr std::string_view kOptionsType = "runtimeoptions.v1.Options";

bool IsOptionsType(std::string_view type_url) {
  if (type_url == kOptionsType) return true;
  // "type.googleapis.com/runtimeoptions.v1.Options" or any other host.
  const size_t slash = type_url.rfind('/');
  return slash != std::string_view::npos && type_url.substr(slash + 1) == kOptionsType;
}

}  // namespace

Result<RuntimeOptions> ParseRuntimeOptions(std::string_view any_bytes) {
  RuntimeOptions out;
  if (any_bytes.empty()) return out;
  google::protobuf::Any any;
  if (!any.ParseFromArray(any_bytes.data(), static_cast<int>(any_bytes.size())))
    return InvalidArgument("runtime options on stdin: not a serialized google.protobuf.Any");
  if (!IsOptionsType(any.type_url()))
    return InvalidArgument("runtime options on stdin: unsupported type_url \"" + any.type_url() +
                           "\" (want runtimeoptions.v1.Options)");
  runtimeoptions::v1::Options options;
  if (!options.ParseFromString(any.value()))
    return InvalidArgument("runtime options on stdin: value does not parse as runtimeoptions.v1.Options");
  out.config_path = options.config_path();
  return out;
}

Result<std::string> ReadOptionsInput(int fd, size_t limit) {
  std::string data;
  if (::isatty(fd)) return data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // No stdin at all (closed fd) is the same as no options.
      if (errno == EBADF) return data;
      return ErrnoStatus("read runtime options from stdin");
    }
    if (n == 0) return data;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > limit)
      return InvalidArgument("runtime options on stdin exceed " + std::to_string(limit) + " bytes");
  }
}

std::string SerializeRuntimeOptions(const RuntimeOptions& options, std::string_view type_url) {
  runtimeoptions::v1::Options msg;
  msg.set_config_path(options.config_path);
  google::protobuf::Any any;
  any.set_type_url(std::string(type_url));
  any.set_value(msg.SerializeAsString());
  return any.SerializeAsString();
}

}  // namespace capsule::shim::launcher
