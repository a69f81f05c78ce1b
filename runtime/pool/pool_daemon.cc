// See pool_daemon.h.
#include "runtime/pool/pool_daemon.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/stop_signals.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/pool/pool_service.h"
#include "runtime/pool/warm_pool.h"

namespace capsule::pool {
namespace {

const log::Logger kLog("poold");

// True when a daemon already answers at `path`.
bool SomeoneListens(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (!fd || path.size() >= sizeof sa.sun_path) return false;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
}

// The socket's dir is made root-only (0700) when we create it; an existing
// one must not be writable by others (someone could swap the socket).
Status PrepareSocket(const std::string& path) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) {
    RETURN_IF_ERROR(MkdirAll(dir, 0700));
    struct stat st{};
    if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir);
    if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
      return FailedPrecondition("pool.socket's directory " + dir + " is writable by everyone");
  }
  if (SomeoneListens(path)) return AlreadyExists("a pool daemon already serves " + path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove stale socket " + path);
  return Status::Ok();
}


}  // namespace

int RunPoolDaemon(const config::Config& config) {
  WarmPoolOptions o;
  o.config = config;
  return RunPoolDaemon(std::move(o));
}

int RunPoolDaemon(WarmPoolOptions o) {
  const config::Config& config = o.config;
  BlockStopSignals();  // before any thread starts, so WaitForStopSignal gets them
  ::signal(SIGPIPE, SIG_IGN);

  const std::string& path = config.pool.socket;
  if (Status st = PrepareSocket(path); !st.ok()) {
    kLog.Error("{}", st.ToString());
    return 1;
  }
  auto pool = WarmPool::Start(o);
  if (!pool.ok()) {
    kLog.Error("start the pool: {}", pool.status().ToString());
    return 1;
  }
  PoolService service(pool->get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  // The socket is created 0600 (no window with a wider mode), root's alone.
  const mode_t old_umask = ::umask(0177);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ::umask(old_umask);
  if (!server) {
    kLog.Error("serve the pool API on {}: gRPC could not listen there", path);
    return 1;
  }
  kLog.Info("capsule-poold serving {} (pid {})", path, ::getpid());
  const int sig = WaitForStopSignal();
  kLog.Info("got signal {}; stopping: no more claims, then draining", sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server.reset();
  pool->reset();  // drains
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) kLog.Warn("{}", ErrnoStatus("remove " + path).ToString());
  kLog.Info("capsule-poold stopped");
  return 0;
}

}  // namespace capsule::pool
