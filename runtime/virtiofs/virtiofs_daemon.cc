// Start: share mount -> virtiofsd spawned as a daemon (stderr to its log) ->
// pid file -> wait for the socket with inotify while watching the pidfd.
// The C virtiofsd of QEMU 7.2 creates and listens on its socket, then blocks
// in accept(); its namespace sandbox is set up only once QEMU connects, so
// the socket is the readiness signal there is.
#include "runtime/virtiofs/virtiofs_daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"
#include "runtime/host/daemon.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::virtiofs {
namespace {

using std::chrono::milliseconds;
const log::Logger kVirtiofsDaemonLog("virtiofs");
constexpr milliseconds kKillGrace{10000};

int MsLeft(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

Status WithLog(Status st, const VirtiofsPaths& paths) {
  std::string tail = ReadLogTail(paths.log(), 2048);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  if (tail.empty()) return st;
  return st.WithMessage(st.message() + "; virtiofsd said: " + tail);
}

// Waits for `name` to appear in `dir`, or the pidfd to fire, or the deadline.
Status WaitForSocket(const VirtiofsPaths& paths, int pidfd, milliseconds timeout) {
  UniqueFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!in) return ErrnoStatus("inotify_init1");
  if (::inotify_add_watch(in.get(), paths.dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0)
    return ErrnoStatus("inotify_add_watch " + paths.dir);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Checked after the watch exists, so a creation in between is not missed.
    if (PathExists(paths.socket())) return Status::Ok();
    pollfd p[2] = {{in.get(), POLLIN, 0}, {pidfd, POLLIN, 0}};
    int r = ::poll(p, 2, MsLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll");
    if ((p[1].revents & POLLIN) != 0) return Unavailable("virtiofsd exited during start-up");
    if (r == 0) return DeadlineExceeded(fmt::format("virtiofsd did not create {} within {} ms", paths.socket(), timeout.count()));
    char buf[4096];
    while (::read(in.get(), buf, sizeof buf) > 0) {
    }
  }
}

void RemoveFiles(const VirtiofsPaths& paths) {
  for (const std::string& f : {paths.socket(), paths.pidfile(), paths.log()}) ::unlink(f.c_str());
}

// A pidfd for `pid` if it runs virtiofsd for this socket (not a reuse).
Result<UniqueFd> OpenServing(pid_t pid, const std::string& socket) {
  return OpenProcessWithArgument(pid, "--socket-path=" + socket);
}

}  // namespace

VirtiofsOptions VirtiofsOptions::FromConfig(const config::Config& config, std::string vm_dir) {
  VirtiofsOptions o;
  o.daemon_path = config.virtiofs.daemon;
  o.cache = config.virtiofs.cache;
  o.thread_pool_size = config.virtiofs.thread_pool_size;
  o.vm_dir = std::move(vm_dir);
  struct stat st {};
  if (!config.guest.modules.empty() && ::stat(config.guest.modules.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    o.modules_dir = config.guest.modules;
  } else if (!config.guest.modules.empty()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      kVirtiofsDaemonLog.Warn("guest.modules {} is not a directory: guests load only their image's own kernel modules",
                              config.guest.modules);
  }
  return o;
}

std::vector<std::string> VirtiofsdCommandLine(const VirtiofsOptions& o) {
  VirtiofsPaths paths(o.vm_dir);
  std::vector<std::string> a = {o.daemon_path,
                                "-f",
                                "--socket-path=" + paths.socket(),
                                "-o", "source=" + paths.share(),
                                "-o", "cache=" + o.cache,
                                "-o", o.sandbox == Sandbox::kNamespace ? "sandbox=namespace" : "sandbox=chroot",
                                "-o", o.xattr ? "xattr" : "no_xattr"};
  if (o.announce_submounts) a.insert(a.end(), {"-o", "announce_submounts"});
  // Always given: QEMU's C virtiofsd defaults to a pool of 64, the Rust one to none.
  a.push_back(fmt::format("--thread-pool-size={}", o.thread_pool_size));
  return a;
}

Result<std::unique_ptr<VirtiofsDaemon>> VirtiofsDaemon::Start(const VirtiofsOptions& o) {
  VirtiofsPaths paths(o.vm_dir);
  std::string what = "start virtiofsd for " + o.vm_dir;
  if (o.vm_dir.empty() || o.vm_dir.front() != '/') return InvalidArgument(what + ": vm_dir must be absolute");
  if (o.cache != "none" && o.cache != "auto" && o.cache != "always")
    return InvalidArgument(fmt::format("{}: cache must be none, auto or always, got '{}'", what, o.cache));
  if (::access(o.daemon_path.c_str(), X_OK) != 0) return ErrnoStatus(what + ": " + o.daemon_path);
  if (paths.socket().size() > 107) return InvalidArgument(what + ": socket path too long: " + paths.socket());
  if (auto old = ReadFile(paths.pidfile()); old.ok()) {
    pid_t pid = static_cast<pid_t>(std::atoi(old->c_str()));
    if (pid > 0 && OpenServing(pid, paths.socket()).ok())
      return AlreadyExists(fmt::format("{}: virtiofsd pid {} already serves it", what, pid));
  }
  RETURN_IF_ERROR_CTX(MkdirAll(o.vm_dir, 0750), what);
  ASSIGN_OR_RETURN(SharedMount share, SharedMount::Create(paths.host_tree(), paths.share()));
  if (!o.modules_dir.empty()) RETURN_IF_ERROR_CTX(share.BindReadOnly(o.modules_dir, std::string(guest_abi::kSharedModulesDir)),
                                                  what + ": guest.modules");
  RemoveFiles(paths);  // stale leftovers of a daemon that is gone
  UniqueFd log_fd(::open(paths.log().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
  if (!log_fd) return ErrnoStatus(what + ": open " + paths.log());

  DaemonOptions d;
  d.argv = VirtiofsdCommandLine(o);
  d.stdout_fd = log_fd.get();
  d.stderr_fd = log_fd.get();
  auto daemon = SpawnDaemon(d);
  if (!daemon.ok()) {
    RemoveFiles(paths);
    return daemon.status().WithContext(what);
  }
  std::unique_ptr<VirtiofsDaemon> v(new VirtiofsDaemon(paths, daemon->pid, std::move(daemon->pidfd), std::move(share)));
  // From here on `v` cleans up after any failure.
  RETURN_IF_ERROR_CTX(WriteFileAtomic(paths.pidfile(), std::to_string(v->pid_) + "\n", 0644, Durability::kVolatile), what);
  Status ready = WaitForSocket(paths, v->pidfd_.get(), o.ready_timeout);
  if (!ready.ok()) {
    Status failed = WithLog(std::move(ready).WithContext(what), paths);
    (void)v->Stop(milliseconds(0));
    return failed;
  }
  kVirtiofsDaemonLog.Info("virtiofsd pid {} serves {} on {}", v->pid_, paths.share(), paths.socket());
  return v;
}

Result<std::unique_ptr<VirtiofsDaemon>> VirtiofsDaemon::Attach(const std::string& vm_dir) {
  VirtiofsPaths paths(vm_dir);
  std::string what = "attach virtiofsd of " + vm_dir;
  auto text = ReadFile(paths.pidfile());
  if (!text.ok()) return text.status().WithContext(what);
  pid_t pid = static_cast<pid_t>(std::atoi(text->c_str()));
  if (pid <= 0) return InvalidArgument(fmt::format("{}: {} holds no pid", what, paths.pidfile()));
  auto share = SharedMount::Adopt(paths.host_tree(), paths.share());
  if (!share.ok()) kVirtiofsDaemonLog.Warn("{}: {}", what, share.status().message());
  UniqueFd pidfd;
  if (auto fd = OpenServing(pid, paths.socket()); fd.ok()) {
    pidfd = std::move(*fd);
  } else {
    kVirtiofsDaemonLog.Warn("{}: pid {} no longer runs virtiofsd; adopting it as exited", what, pid);
    pid = -1;
  }
  std::unique_ptr<VirtiofsDaemon> v(
      new VirtiofsDaemon(paths, pid, std::move(pidfd), share.ok() ? std::move(*share) : SharedMount()));
  return v;
}

VirtiofsDaemon::~VirtiofsDaemon() {
  if (done_) return;
  Status st = Stop(milliseconds(0));
  if (!st.ok())
    kVirtiofsDaemonLog.Error("virtiofsd of {}: cleanup on destruction failed: {}", paths_.dir, st.ToString());
}

bool VirtiofsDaemon::running() const { return pidfd_ && !PidfdExited(pidfd_.get()); }

Status VirtiofsDaemon::Stop(milliseconds grace) {
  if (done_) return Status::Ok();
  done_ = true;
  if (pidfd_ && !PidfdExited(pidfd_.get())) {
    if (grace.count() > 0) {
      RETURN_IF_ERROR(PidfdSignal(pidfd_.get(), SIGTERM));
      PidfdWait(pidfd_.get(), static_cast<int>(grace.count()));
    }
    if (!PidfdExited(pidfd_.get())) {
      RETURN_IF_ERROR(PidfdSignal(pidfd_.get(), SIGKILL));
      if (!PidfdWait(pidfd_.get(), static_cast<int>(kKillGrace.count())))
        return Internal(fmt::format("virtiofsd pid {} survived SIGKILL", pid_));
    }
  }
  pidfd_.reset();
  RemoveFiles(paths_);
  Status st = share_.Release();
  if (::rmdir(paths_.dir.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT && st.ok())
    st = ErrnoStatus("rmdir " + paths_.dir);
  return st.WithContext("clean up virtiofsd of " + paths_.dir);
}

void VirtiofsDaemon::Detach() {
  done_ = true;
  share_.Leave();
  pidfd_.reset();
}

}  // namespace capsule::virtiofs
