// What a forked child does with its fds, signals and working directory
// before exec: the one set-up behind ChildProcess::Spawn (subprocess.cc)
// and SpawnDaemon (daemon.cc). Everything is prepared by the parent; the
// child makes only async-signal-safe calls (no allocation after fork).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace capsule {

struct ChildSetup {
  int stdio[3] = {-1, -1, -1};  // fds that become 0, 1, 2; -1 means dev_null
  int dev_null = -1;
  // Every fd above 2 closes on exec (close_range), then keep_fds are
  // inherited again. Without it, fds keep their own CLOEXEC flags.
  bool close_other_fds = false;
  const int* keep_fds = nullptr;  // inherited as they are numbered
  size_t keep_count = 0;
  // {child fd, parent fd}: placed at the child's numbers (all above 2);
  // `scratch` holds extra_count ints, allocated by the parent.
  const std::pair<int, int>* extra_fds = nullptr;
  size_t extra_count = 0;
  int* scratch = nullptr;
  bool default_signal_handlers = false;  // every handler back to SIG_DFL
  const char* cwd = nullptr;             // nullptr or "": stay
};

enum class ChildStep { kStdio, kPassFds, kChdir };

// The lowest fd number above every extra_fds target (3 when none): an fd
// the child must keep through the set-up belongs at or above it.
int ChildFdFloor(const ChildSetup& s);
// Applies `s` in the forked child, the signal mask emptied; the step that
// failed (errno says why), or nullopt.
std::optional<ChildStep> SetUpChild(const ChildSetup& s);
const char* ChildStepName(ChildStep step);

// execve's argv or envp for `v`, null-terminated, made by the parent before
// fork (the child must not allocate); valid while `v` lives unchanged.
std::vector<char*> CStrings(const std::vector<std::string>& v);

}  // namespace capsule
