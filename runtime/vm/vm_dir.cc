// State dir checks and creation for SandboxVm (see vm_dir.h).
#include "runtime/vm/vm_dir.h"

#include <fmt/format.h>
#include <cctype>
#include <sys/stat.h>
#include <sys/un.h>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::vm {

Status ValidateVmId(std::string_view id) {
  auto ok_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; };
  bool ok = !id.empty() && id.size() <= hypervisor::kMaxVmIdLen && std::isalnum(static_cast<unsigned char>(id[0]));
  for (char c : id) ok = ok && ok_char(c);
  if (ok) return Status::Ok();
  return InvalidArgument(fmt::format("VM id '{}' is invalid: 1..{} characters of [A-Za-z0-9_.-], starting with a "
                                     "letter or digit",
                                     id, hypervisor::kMaxVmIdLen));
}

Status CheckSocketPathsFit(const std::string& state_dir) {
  constexpr size_t kMax = sizeof(sockaddr_un{}.sun_path) - 1;
  std::string longest = state_dir + "/" + std::string(kLongestSocketName);
  if (longest.size() <= kMax) return Status::Ok();
  return InvalidArgument(fmt::format("VM state dir {} is too long: its sockets ({}) would exceed the {} bytes of a "
                                     "unix socket path; use a shorter runtime.state_dir or VM id",
                                     state_dir, longest, kMax));
}

Status CreateVmDir(const std::string& state_dir) {
  size_t slash = state_dir.rfind('/');
  if (slash == std::string::npos || slash == 0) return InvalidArgument("VM state dir must be absolute: " + state_dir);
  RETURN_IF_ERROR(MkdirAll(state_dir.substr(0, slash), 0700));
  if (::mkdir(state_dir.c_str(), 0700) == 0) return Status::Ok();
  if (errno == EEXIST)
    return AlreadyExists(fmt::format("VM state dir {} already exists: a VM with this id is running or was left "
                                     "behind (capsule-runtime vm stop <id> removes it)",
                                     state_dir));
  return ErrnoStatus("mkdir " + state_dir);
}

}  // namespace capsule::vm
