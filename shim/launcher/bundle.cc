// Bundle files: config.json annotations, the address file, the log FIFO.
#include "shim/launcher/bundle.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/host/daemon.h"
#include "runtime/host/proc_stat.h"
#include "shim/launcher/bundle_record.h"
#include "shim/launcher/socket.h"

namespace capsule::shim::launcher {
namespace {
const log::Logger kBundleLog("shim.bundle");
}  // namespace

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
  return WriteFileAtomic(bundle + "/" + kAddressFile, address, 0600, Durability::kVolatile);
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
  if (auto record = ReadBundleRecord(bundle); record.ok() && record->shim_pid > 0) {
    const ProcessIdentity shim{static_cast<pid_t>(record->shim_pid), record->shim_start_time, record->shim_boot_id};
    auto alive = OpenProcess(shim);
    // A killed daemon closes its fds (containerd runs `delete` on seeing
    // its connection go) a moment before its pid is released.
    if (alive.ok()) return !PidfdExited(alive->get()) && !ProcessExiting(shim.pid);
    if (alive.status().code() == Code::kNotFound) return false;
    kBundleLog.Warn("shim pid {}: {}; asking its socket instead", record->shim_pid, alive.status().ToString());
  }
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
