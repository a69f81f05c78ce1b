// The caller's terminal in raw mode for the length of an interactive
// session (every key, Ctrl-C included, goes to the guest's pty, which does
// its own echo and line editing), restored however the session ends.
#pragma once

#include <termios.h>

#include <optional>

#include "runtime/common/status.h"

namespace capsule::guestexec {

class RawTerminal {
 public:
  // FAILED_PRECONDITION when `fd` is not a terminal.
  static Result<RawTerminal> Enter(int fd);
  ~RawTerminal();
  RawTerminal(RawTerminal&& other) noexcept : fd_(other.fd_), saved_(other.saved_) { other.saved_.reset(); }
  RawTerminal& operator=(RawTerminal&&) = delete;
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  RawTerminal(int fd, const termios& saved) : fd_(fd), saved_(saved) {}
  int fd_;
  std::optional<termios> saved_;
};

// The window size of terminal `fd`; nullopt when it has none.
struct WindowSize {
  unsigned rows = 0, cols = 0;
};
std::optional<WindowSize> TerminalSize(int fd);

}  // namespace capsule::guestexec
