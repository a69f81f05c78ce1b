#include "runtime/guestexec/raw_terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

namespace capsule::guestexec {

Result<RawTerminal> RawTerminal::Enter(int fd) {
  termios saved{};
  if (!::isatty(fd) || ::tcgetattr(fd, &saved) != 0)
    return FailedPrecondition("standard input is not a terminal (-t needs one; leave -t out to pipe data)");
  termios raw = saved;
  ::cfmakeraw(&raw);
  if (::tcsetattr(fd, TCSANOW, &raw) != 0) return ErrnoStatus("set the terminal to raw mode");
  return RawTerminal(fd, saved);
}

RawTerminal::~RawTerminal() {
  if (saved_) (void)::tcsetattr(fd_, TCSANOW, &*saved_);
}

std::optional<WindowSize> TerminalSize(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return std::nullopt;
  return WindowSize{ws.ws_row, ws.ws_col};
}

}  // namespace capsule::guestexec
