// Bundle files: config.json annotations, the address file, the log FIFO.
#include "shim/launcher/bundle.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "shim/launcher/socket.h"

namespace capsule::shim::launcher {

Result<std::string> ShimGroup(const std::string& bundle, const std::string& id) {
  const std::string path = bundle + "/config.json";
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json spec = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object())
    return InvalidArgument(path + ": not a JSON object");
  auto annotations = spec.find("annotations");
  if (annotations == spec.end() || annotations->is_null()) return id;
  if (!annotations->is_object()) return InvalidArgument(path + ": \"annotations\" is not an object");
  auto sandbox = annotations->find(kSandboxIdAnnotation);
  if (sandbox == annotations->end()) return id;
  if (!sandbox->is_string() || sandbox->get_ref<const std::string&>().empty())
    return InvalidArgument(path + ": annotation " + kSandboxIdAnnotation + " is not a non-empty string");
  return sandbox->get<std::string>();
}

Status WriteAddressFile(const std::string& bundle, const std::string& address) {
  return WriteFileAtomic(bundle + "/" + kAddressFile, address, 0600);
}

Result<std::string> ReadAddressFile(const std::string& bundle) {
  const std::string path = bundle + "/" + kAddressFile;
  ASSIGN_OR_RETURN(std::string address, ReadFile(path));
  if (address.empty()) return InvalidArgument(path + " is empty");
  return address;
}

Result<std::string> GroupSocketPath(const std::string& bundle) {
  ASSIGN_OR_RETURN(std::string address, ReadAddressFile(bundle));
  return SocketPathFromAddress(address);
}

bool GroupStillServed(const std::string& bundle) {
  auto path = GroupSocketPath(bundle);
  return path.ok() && CanConnect(*path);
}

Result<UniqueFd> OpenLogFifo(const std::string& bundle) {
  const std::string path = bundle + "/" + kLogFifo;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISFIFO(st.st_mode)) return FailedPrecondition(path + " is not a FIFO");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd && errno == ENXIO) {
    // No reader yet (containerd restarting, or a test): hold one ourselves.
    fd.reset(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  }
  if (!fd) return ErrnoStatus("open log FIFO " + path);
  return fd;
}

Result<std::string> WorkingDir() {
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) == nullptr) return ErrnoStatus("getcwd");
  return std::string(buf);
}

}  // namespace capsule::shim::launcher
