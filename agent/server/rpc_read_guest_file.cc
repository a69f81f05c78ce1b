// ReadGuestFile: at most max_bytes of a regular guest file, for diagnostics
// and the host's virtio-fs checks. O_NONBLOCK|O_NOCTTY and the regular-file
// check keep a FIFO or a tty path from hanging or hijacking the call.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/storage/guest_path.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::server {
namespace {

Result<std::string> ReadBounded(const std::string& path, uint32_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return ErrnoStatus("open " + path);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(fmt::format("{} is not a regular file", path));
  std::string data(max_bytes, '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

}  // namespace

grpc::Status AgentService::ReadGuestFile(Ctx*, const v1::ReadGuestFileRequest* req, v1::ReadGuestFileResponse* resp) {
  return Guarded("ReadGuestFile", [&]() -> Status {
    RETURN_IF_ERROR(storage::CheckAbsolutePath("path", req->path()));
    if (req->max_bytes() == 0 || req->max_bytes() > kMaxReadGuestFileBytes) {
      return InvalidArgument(fmt::format("max_bytes must be 1..{}, got {}", kMaxReadGuestFileBytes, req->max_bytes()));
    }
    ASSIGN_OR_RETURN(std::string data, ReadBounded(req->path(), req->max_bytes()));
    resp->set_data(std::move(data));
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
