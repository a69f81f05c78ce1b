// See unix_stream.h.
#include "runtime/common/unix_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "runtime/common/backoff.h"
#include "runtime/common/file_util.h"

namespace capsule {
namespace {

Result<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return InvalidArgument(fmt::format("unix socket path '{}' is empty or longer than {} bytes", path,
                                       sizeof addr.sun_path - 1));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Whether something accepts on the socket file at `addr` (a connect that
// would block on a full backlog counts as alive).
bool Accepts(const sockaddr_un& addr) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe) return false;
  const int rc = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  return rc == 0 || errno == EAGAIN || errno == EINPROGRESS;
}

Status ClearThePath(const std::string& path, const sockaddr_un& addr, UnixListenOptions::Existing policy) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  switch (policy) {
    case UnixListenOptions::Existing::kRefuse:
      return Status::Ok();  // bind(2) says EADDRINUSE
    case UnixListenOptions::Existing::kReplaceStale:
      if (!S_ISSOCK(st.st_mode)) return FailedPrecondition("listen on " + path + ": a file that is no socket is in the way");
      if (Accepts(addr)) return AlreadyExists("listen on " + path + ": another process serves it");
      break;
    case UnixListenOptions::Existing::kReplace:
      break;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink the old socket " + path);
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path, const UnixListenOptions& o) {
  ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path));
  RETURN_IF_ERROR(ClearThePath(path, addr, o.existing));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (o.nonblocking ? SOCK_NONBLOCK : 0), 0));
  if (!fd) return ErrnoStatus("socket(AF_UNIX) for " + path);
  mode_t old_umask = 0;
  if (o.restrict_umask_at_bind) old_umask = ::umask(static_cast<mode_t>(~o.mode & 0777));
  const int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  if (o.restrict_umask_at_bind) ::umask(old_umask);
  if (rc != 0) {
    if (bind_errno == EADDRINUSE) return AlreadyExists("socket " + path + " already exists");
    return ErrnoStatus("bind " + path, bind_errno);
  }
  Status st;
  if (::chmod(path.c_str(), o.mode) != 0) {
    st = ErrnoStatus(fmt::format("chmod {:o} {}", o.mode, path));
  } else if (::listen(fd.get(), o.backlog) != 0) {
    st = ErrnoStatus("listen " + path);
  }
  if (!st.ok()) {
    ::unlink(path.c_str());
    return st;
  }
  return fd;
}

Result<UniqueFd> ConnectUnix(const std::string& path, const UnixConnectOptions& o) {
  ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path));
  const auto deadline = std::chrono::steady_clock::now() + o.listen_wait;
  Backoff backoff({std::chrono::milliseconds(1), std::chrono::milliseconds(50)});
  for (;;) {
    // Non-blocking, so a full backlog is EAGAIN (retried) instead of a wait
    // on a stalled server.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return ErrnoStatus("socket(AF_UNIX) for " + path);
    int rc;
    do {
      rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      if (!o.nonblocking) RETURN_IF_ERROR_CTX(SetNonBlocking(fd.get(), false), "connection to " + path);
      return fd;
    }
    const int err = errno;
    Status st = ErrnoStatus("connect " + path, err);
    if (err != ENOENT && err != ECONNREFUSED && err != EAGAIN) return st;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return Status(Code::kUnavailable, o.listen_wait.count() > 0
                                            ? fmt::format("{} (for {} ms)", st.message(), o.listen_wait.count())
                                            : st.message());
    backoff.Wait(deadline);
  }
}

}  // namespace capsule
