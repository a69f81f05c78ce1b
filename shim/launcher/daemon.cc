// Daemon set-up and tear-down around the serve hook.
#include "shim/launcher/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "runtime/common/logging.h"
#include "runtime/common/reaper.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/socket.h"

namespace capsule::shim::launcher {
namespace {

const log::Logger kDaemonLog("shim.daemon");

// Watches SIGTERM/SIGINT through a signalfd and turns them into a shutdown
// request. The signals must be blocked in every thread first, so this is
// constructed before any thread starts.
class SignalWatcher {
 public:
  static Result<std::unique_ptr<SignalWatcher>> Start(ShutdownSignal* shutdown) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return Internal("block SIGTERM/SIGINT");
    UniqueFd sfd(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!sfd) return ErrnoStatus("signalfd");
    UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
    if (!stop) return ErrnoStatus("eventfd");
    auto w = std::unique_ptr<SignalWatcher>(new SignalWatcher(std::move(sfd), std::move(stop)));
    w->thread_ = std::thread([w = w.get(), shutdown] { w->Loop(shutdown); });
    return w;
  }
  ~SignalWatcher() {
    uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }

 private:
  SignalWatcher(UniqueFd sfd, UniqueFd stop) : sfd_(std::move(sfd)), stop_(std::move(stop)) {}
  void Loop(ShutdownSignal* shutdown) {
    for (;;) {
      pollfd p[2] = {{sfd_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents != 0) return;
      signalfd_siginfo info{};
      if (::read(sfd_.get(), &info, sizeof info) == sizeof info) {
        kDaemonLog.Info("got signal {}; shutting down", info.ssi_signo);
        shutdown->Request("signal " + std::to_string(info.ssi_signo));
      }
    }
  }
  UniqueFd sfd_;
  UniqueFd stop_;
  std::thread thread_;
};

// Sends log lines (and anything written to stderr, e.g. a sanitizer report)
// into the bundle's log FIFO. Without one the daemon's stderr is /dev/null.
void RedirectLogs(const std::string& bundle, bool debug) {
  if (debug) log::SetLevel(log::Level::kDebug);
  auto fd = OpenLogFifo(bundle);
  if (!fd.ok()) return;
  if (::dup2(fd->get(), STDERR_FILENO) < 0) return;
  log::SetFd(STDERR_FILENO);
}

// The inherited socket must be a listening unix socket; it becomes CLOEXEC
// so the VMM and other children of the shim do not inherit it.
Result<std::string> AdoptSocket(int fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0)
    return ErrnoStatus("inherited socket fd " + std::to_string(fd));
  if (listening == 0) return InvalidArgument("inherited fd " + std::to_string(fd) + " is not listening");
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return ErrnoStatus("set CLOEXEC on socket fd");
  return BoundPath(fd);
}

// Removes the socket file if it is still the one this daemon was given (a
// successor daemon may have replaced a path we no longer serve).
void RemoveSocket(const std::string& path, ino_t ino) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || st.st_ino != ino) return;
  if (::unlink(path.c_str()) != 0) kDaemonLog.Warn("{}", ErrnoStatus("remove socket " + path).ToString());
}

}  // namespace

void ShutdownSignal::Request(std::string reason) {
  {
    std::lock_guard lock(mu_);
    if (requested_) return;
    requested_ = true;
    reason_ = std::move(reason);
  }
  cv_.notify_all();
}

bool ShutdownSignal::requested() const {
  std::lock_guard lock(mu_);
  return requested_;
}

std::string ShutdownSignal::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return requested_; });
  return reason_;
}

bool ShutdownSignal::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return requested_; });
}

namespace {

// Subreaper and Reaper: every process the shim starts (and their orphans)
// is reaped here, and ChildProcess takes exit statuses from the Reaper.
Status BecomeReaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return ErrnoStatus("prctl(PR_SET_CHILD_SUBREAPER)");
  return Reaper::Instance().Start();
}

void FillContext(const ShimFlags& flags, DaemonContext& ctx) {
  const char* ttrpc = std::getenv("TTRPC_ADDRESS");
  ctx.ns = flags.namespace_;
  ctx.id = flags.id;
  ctx.bundle = flags.bundle;
  ctx.containerd_address = flags.address;
  ctx.ttrpc_address = ttrpc != nullptr ? ttrpc : "";
  ctx.publish_binary = flags.publish_binary;
  ctx.config_path = flags.config_path;
  ctx.debug = flags.debug;
}

}  // namespace

int RunDaemon(const ShimFlags& flags, const ServeFn& serve) {
  ShutdownSignal shutdown;
  auto watcher = SignalWatcher::Start(&shutdown);  // before any other thread
  ::signal(SIGPIPE, SIG_IGN);  // a gone FIFO reader must be EPIPE, not death
  RedirectLogs(flags.bundle, flags.debug);
  if (!watcher.ok()) {
    kDaemonLog.Error("{}", watcher.status().ToString());
    return 1;
  }
  auto path = AdoptSocket(flags.socket_fd);
  if (!path.ok()) {
    kDaemonLog.Error("{}", path.status().ToString());
    return 1;
  }
  DaemonContext ctx;
  ctx.listen_fd.reset(flags.socket_fd);
  struct stat sock_st{};
  const ino_t sock_ino = ::stat(path->c_str(), &sock_st) == 0 ? sock_st.st_ino : 0;
  Status st = BecomeReaper();
  if (st.ok()) {
    FillContext(flags, ctx);
    ctx.socket_path = *path;
    ctx.shutdown = &shutdown;
    kDaemonLog.Info("shim daemon pid {} serving {} (namespace {}, task {})", ::getpid(), *path, ctx.ns, ctx.id);
    st = serve ? serve(ctx) : Unimplemented("no serve hook linked into this shim");
    if (!st.ok()) st = std::move(st).WithContext("serve");
  }
  RemoveSocket(*path, sock_ino);
  if (!st.ok()) {
    kDaemonLog.Error("{}", st.ToString());
    return 1;
  }
  kDaemonLog.Info("shim daemon exiting ({})", shutdown.requested() ? shutdown.Wait() : "serve returned");
  return 0;
}

}  // namespace capsule::shim::launcher
