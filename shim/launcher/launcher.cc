// Dispatch: flags -> start | delete | daemon, and what each prints.
// `start` prints only the address (containerd reads stdout+stderr as one);
// its logs go to the bundle's log FIFO, its error (if any) to stderr.
#include "shim/launcher/launcher.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/daemon.h"
#include "shim/launcher/delete.h"
#include "shim/launcher/runtime_options.h"
#include "shim/launcher/socket.h"
#include "shim/launcher/start.h"

namespace capsule::shim::launcher {
namespace {

const log::Logger kLauncherLog("shim");

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

Status WriteAllStdout(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(STDOUT_FILENO, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write to stdout");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

int Fail(const Status& st) {
  kLauncherLog.Error("{}", st.ToString());
  std::fprintf(stderr, "%s: %s\n", kShimName, st.ToString().c_str());
  return kExitFailure;
}

Result<std::string> SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n < 0) return ErrnoStatus("readlink /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::string> ResolveBundle(const ShimFlags& flags) {
  if (flags.bundle.empty()) return WorkingDir();
  if (flags.bundle[0] == '/') return flags.bundle;
  ASSIGN_OR_RETURN(std::string cwd, WorkingDir());
  return cwd + "/" + flags.bundle;
}

int RunStart(const ShimFlags& flags, const std::string& bundle, const Hooks& hooks) {
  // Logs of start go to the log FIFO (or nowhere): stdout+stderr are the address.
  auto log_fd = OpenLogFifo(bundle);
  log::SetFd(log_fd.ok() ? log_fd->get() : -1);
  if (flags.debug) log::SetLevel(log::Level::kDebug);
  StartRequest req{flags, bundle, "", SocketDir(), ""};
  auto options = ReadOptionsInput(STDIN_FILENO, kMaxOptionsBytes);
  if (!options.ok()) return Fail(options.status());
  req.options = std::move(*options);
  auto daemon = hooks.daemon_exe.empty() ? SelfExe() : Result<std::string>(hooks.daemon_exe);
  if (!daemon.ok()) return Fail(daemon.status());
  req.daemon_exe = std::move(*daemon);
  auto address = StartShim(req);
  if (!address.ok()) return Fail(std::move(address).status().WithContext("start"));
  if (Status st = WriteAllStdout(*address); !st.ok()) return Fail(st);
  return 0;
}

int RunDelete(const ShimFlags& flags, const std::string& bundle, const Hooks& hooks, char** argv) {
  // containerd logs all of delete's stderr as "cleanup warnings": only
  // warnings and errors go there unless -debug.
  log::SetLevel(flags.debug ? log::Level::kDebug : log::Level::kWarn);
  // containerd runs `delete` whenever a task's connection closes: mostly
  // for one container of a pod whose daemon serves on and cleans up after
  // it. Only a gone daemon's leftovers need the daemon binary's clean-up.
  if (!hooks.cleanup && !hooks.daemon_exe.empty() && !GroupStillServed(bundle)) {
    ::execv(hooks.daemon_exe.c_str(), argv);
    return Fail(ErrnoStatus("delete: run " + hooks.daemon_exe));
  }
  auto out = DeleteShim(DeleteRequest{flags, bundle, hooks.cleanup});
  if (!out.ok()) return Fail(std::move(out).status().WithContext("delete"));
  if (Status st = WriteAllStdout(*out); !st.ok()) return Fail(st);
  return 0;
}

void PrintVersion(const std::string& program) {
  std::printf("%s:\n  Version:  %s\n", program.c_str(), kVersion);
}

}  // namespace

Result<std::string> BesideSelf(const std::string& name) {
  ASSIGN_OR_RETURN(std::string self, SelfExe());
  return self.substr(0, self.rfind('/') + 1) + name;
}

int Main(int argc, char** argv, const Hooks& hooks) {
  const std::string program = argc > 0 ? argv[0] : kShimName;
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  auto flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n%s", flags.status().message().c_str(), Usage(program).c_str());
    return kExitUsage;
  }
  if (flags->help) {
    std::fputs(Usage(program).c_str(), stdout);
    return 0;
  }
  if (flags->version) {
    PrintVersion(program);
    return 0;
  }
  if (Status st = ValidateFlags(*flags); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", kShimName, st.message().c_str());
    return kExitUsage;
  }
  auto bundle = ResolveBundle(*flags);
  if (!bundle.ok()) return Fail(bundle.status());
  flags->bundle = *bundle;
  switch (flags->action) {
    case Action::kStart: return RunStart(*flags, *bundle, hooks);
    case Action::kDelete: return RunDelete(*flags, *bundle, hooks, argv);
    case Action::kDaemon:
      if (!hooks.serve) {
        std::fprintf(stderr, "%s: this binary does not serve; %s does\n", kShimName, hooks.daemon_exe.c_str());
        return kExitUsage;
      }
      return RunDaemon(*flags, hooks.serve);
  }
  return kExitFailure;
}

}  // namespace capsule::shim::launcher
