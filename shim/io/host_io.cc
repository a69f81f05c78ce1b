// Host-side stdio ends: opening FIFOs/files and cancellable writes.
#include "shim/io/host_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/file_util.h"

namespace capsule::shim::io {

Result<UniqueFd> OpenOutputPath(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat stdio path " + path);
  UniqueFd fd;
  if (S_ISFIFO(st.st_mode)) {
    fd.reset(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return ErrnoStatus("open output FIFO " + path);
    return fd;
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument("stdio path " + path + " is neither a FIFO nor a file");
  fd.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open output file " + path);
  return fd;
}

Result<UniqueFd> OpenOutputFile(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MkdirAll(path.substr(0, slash)));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return ErrnoStatus("open stdio file " + path);
  return fd;
}

Result<UniqueFd> OpenStdinFifo(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat stdin FIFO " + path);
  if (!S_ISFIFO(st.st_mode)) return InvalidArgument("stdin " + path + " is not a FIFO");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open stdin FIFO " + path);
  return fd;
}

Status WriteAllOrCancel(int fd, std::string_view data, int cancel_fd) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return ErrnoStatus("write stdio");
    pollfd p[2] = {{fd, POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return ErrnoStatus("poll stdio");
    if (p[1].revents != 0) return Cancelled("stdio copy cancelled");
    if (p[0].revents & POLLERR) return ErrnoStatus("write stdio", EPIPE);
  }
  return Status::Ok();
}

}  // namespace capsule::shim::io
