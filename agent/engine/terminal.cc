// ptmx/pts handling with raw ioctls (TIOCSPTLCK, TIOCGPTN, TIOCSCTTY).
#include "agent/engine/terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <string>

namespace capsule::engine {

Status ResizeTerminal(int master_fd, uint32_t rows, uint32_t cols) {
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  if (::ioctl(master_fd, TIOCSWINSZ, &ws) != 0) return ErrnoStatus("ioctl(TIOCSWINSZ)");
  return Status::Ok();
}

Result<UniqueFd> SetupConsole(const std::optional<oci::ConsoleSize>& size) {
  UniqueFd master(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) master.reset(::open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) return ErrnoStatus("open /dev/ptmx in the container");
  int unlock = 0;
  if (::ioctl(master.get(), TIOCSPTLCK, &unlock) != 0) return ErrnoStatus("ioctl(TIOCSPTLCK)");
  int n = -1;
  if (::ioctl(master.get(), TIOCGPTN, &n) != 0) return ErrnoStatus("ioctl(TIOCGPTN)");
  const std::string slave_path = "/dev/pts/" + std::to_string(n);
  UniqueFd slave(::open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return ErrnoStatus("open " + slave_path);
  if (size && size->height > 0 && size->width > 0)
    RETURN_IF_ERROR(ResizeTerminal(master.get(), size->height, size->width));
  if (::ioctl(slave.get(), TIOCSCTTY, 0) != 0) return ErrnoStatus("ioctl(TIOCSCTTY) on " + slave_path);
  for (int fd = 0; fd < 3; ++fd) {
    if (::dup2(slave.get(), fd) < 0) return ErrnoStatus("dup2 console to fd " + std::to_string(fd));
  }
  return master;
}

Status DupStdio(int in, int out, int err) {
  int src[3] = {in, out, err};
  // Lift sources out of 0..2 first so one dup2 cannot clobber another.
  for (int& fd : src) {
    if (fd >= 0 && fd <= 2) {
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) return ErrnoStatus("dup stdio fd");
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (src[i] < 0) continue;
    if (::dup2(src[i], i) < 0) return ErrnoStatus("dup2 stdio to fd " + std::to_string(i));
  }
  return Status::Ok();
}

}  // namespace capsule::engine
