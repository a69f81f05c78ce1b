// See pool_daemon.h.
#include "runtime/pool/pool_daemon.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/host/stop_signals.h"
#include "runtime/pool/pool_service.h"
#include "runtime/pool/warm_pool.h"

namespace capsule::pool {
namespace {

const log::Logger kPoolDaemonLog("poold");

// True when a daemon already answers at `path`.
bool SomeoneListens(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (!fd || path.size() >= sizeof sa.sun_path) return false;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
}

}  // namespace

Status PreparePoolSocket(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  if (slash == std::string::npos) return InvalidArgument("pool.socket " + path + " is not an absolute path");
  RETURN_IF_ERROR(MkdirAll(dir, 0700));
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition("pool.socket's directory " + dir + " is not a directory");
  if (st.st_uid != ::geteuid())
    return FailedPrecondition(fmt::format("pool.socket's directory {} belongs to uid {}, not to us (uid {}): its owner "
                                          "could swap the socket",
                                          dir, st.st_uid, ::geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return FailedPrecondition(fmt::format("pool.socket's directory {} (mode {:04o}) is writable by others than its "
                                          "owner, who could swap the socket",
                                          dir, st.st_mode & 07777));
  if (SomeoneListens(path)) return AlreadyExists("a pool daemon already serves " + path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove stale socket " + path);
  return Status::Ok();
}

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
  if (Status st = PreparePoolSocket(path); !st.ok()) {
    kPoolDaemonLog.Error("{}", st.ToString());
    return 1;
  }
  // Beside the API socket, in the directory just checked.
  if (o.agent_stream_socket.empty()) o.agent_stream_socket = AgentStreamSocketFor(path);
  auto pool = WarmPool::Start(o);
  if (!pool.ok()) {
    kPoolDaemonLog.Error("start the pool: {}", pool.status().ToString());
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
    kPoolDaemonLog.Error("serve the pool API on {}: gRPC could not listen there", path);
    return 1;
  }
  kPoolDaemonLog.Info("capsule-poold serving {} (pid {})", path, ::getpid());
  const int sig = WaitForStopSignal();
  kPoolDaemonLog.Info("got signal {}; stopping: no more claims, then draining", sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server.reset();
  pool->reset();  // drains
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    kPoolDaemonLog.Warn("{}", ErrnoStatus("remove " + path).ToString());
  kPoolDaemonLog.Info("capsule-poold stopped");
  return 0;
}

}  // namespace capsule::pool
