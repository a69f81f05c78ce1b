// fcntl(F_GETFD) tells whether an fd is open; dup2 fills the holes.
#include "agent/init/console.h"

#include <fcntl.h>
#include <unistd.h>

namespace capsule::agent::init {

bool EnsureConsole() {
  bool all_open = true;
  for (int fd = 0; fd <= 2; ++fd) all_open = all_open && ::fcntl(fd, F_GETFD) >= 0;
  if (all_open) return true;
  int console = ::open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (console < 0) return false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) ::dup2(console, fd);
  }
  if (console > 2) ::close(console);
  return true;
}

}  // namespace capsule::agent::init
