// See metrics_server.h.
#include "runtime/metrics/metrics_server.h"

#include <netdb.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/line_io.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::metrics {
namespace {

const log::Logger kMetricsServerLog("metrics");

// A collection the front end waits for reaches it within this, or the
// front end is taken to be stuck.
constexpr std::chrono::seconds kAnswerTimeout{60};
constexpr std::chrono::milliseconds kFrontEndGrace{1000};

Result<UniqueFd> Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return InvalidArgument("metrics: cannot resolve listen host '" + host + "': " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(found, &::freeaddrinfo);
  Status last = Unavailable("metrics: '" + host + "' resolves to no address");
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = ErrnoStatus("metrics: socket");
      continue;
    }
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
      last = ErrnoStatus("metrics: cannot listen on " + host + ":" + service);
      continue;
    }
    return fd;
  }
  return last;
}

Result<int> BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return ErrnoStatus("metrics: getsockname");
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

// "nobody", as the front end's user when we are root.
std::pair<int64_t, int64_t> Nobody() {
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (::getpwnam_r("nobody", &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
    return {found->pw_uid, found->pw_gid};
  return {65534, 65534};
}

}  // namespace

std::vector<std::string> FrontEndArguments(const HttpFrontOptions& http) {
  return {"--listen-fd=" + std::to_string(kFrontEndListenFd),
          "--collector-fd=" + std::to_string(kFrontEndCollectorFd),
          "--max-connections=" + std::to_string(http.max_connections),
          "--max-request-head=" + std::to_string(http.max_request_head),
          "--request-timeout-ms=" + std::to_string(http.request_timeout.count()),
          "--response-timeout-ms=" + std::to_string(http.response_timeout.count()),
          "--cache-ms=" + std::to_string(http.cache_for.count())};
}

struct MetricsServer::Impl {
  int port = 0;
  UniqueFd collector;  // our end of the pair
  std::optional<ChildProcess> front_end;
  std::thread thread;

  // Answers each request of the front end with one collection, until it
  // closes its end (it exited, or we shut ours down).
  void Serve(const Collect& collect, const std::function<void()>& on_exit) {
    for (;;) {
      char req = 0;
      const ssize_t n = ::read(collector.get(), &req, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (req != kCollectRequest) {
        kMetricsServerLog.Error("the metrics front end sent {:#04x}, not a collection request: ending it", req);
        break;
      }
      const std::string text = collect();
      std::string frame(kCollectLengthBytes, '\0');
      for (size_t i = 0; i < kCollectLengthBytes; ++i) frame[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
      frame += text;
      Status st = line_io::WriteAll(collector.get(), frame, std::chrono::steady_clock::now() + kAnswerTimeout,
                                    "metrics front end");
      if (!st.ok()) {
        kMetricsServerLog.Error("{}", st.ToString());
        break;
      }
    }
    ::shutdown(collector.get(), SHUT_RDWR);
    if (on_exit) on_exit();
  }
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port, Collect collect,
                                                            const MetricsServerOptions& options) {
  if (options.front_end.empty()) return InvalidArgument("metrics: no front end program");
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(UniqueFd listen, Listen(host, port));
  ASSIGN_OR_RETURN(impl->port, BoundPort(listen.get()));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return ErrnoStatus("metrics: socketpair");
  impl->collector = UniqueFd(pair[0]);
  UniqueFd theirs(pair[1]);
  SpawnOptions spawn;
  spawn.argv = options.front_end;
  for (std::string& a : FrontEndArguments(options.http)) spawn.argv.push_back(std::move(a));
  spawn.stdout_fd = STDERR_FILENO;
  spawn.stderr_fd = STDERR_FILENO;
  spawn.extra_fds = {{kFrontEndListenFd, listen.get()}, {kFrontEndCollectorFd, theirs.get()}};
  spawn.die_with_parent = true;
  spawn.cwd = "/";
  if (::geteuid() == 0) {
    auto [uid, gid] = Nobody();
    spawn.uid = options.front_end_uid >= 0 ? options.front_end_uid : uid;
    spawn.gid = options.front_end_gid >= 0 ? options.front_end_gid : gid;
  }
  auto child = ChildProcess::Spawn(spawn);
  if (!child.ok()) return std::move(child).status().WithContext("metrics: start the HTTP front end");
  impl->front_end.emplace(std::move(*child));
  Impl* raw = impl.get();
  impl->thread = std::thread([raw, collect = std::move(collect), on_exit = options.on_front_end_exit] {
    raw->Serve(collect, on_exit);
  });
  kMetricsServerLog.Info("serving metrics on http://{}:{}/metrics (front end pid {}, uid {})", host, impl->port,
                         impl->front_end->pid(), spawn.uid < 0 ? static_cast<int64_t>(::geteuid()) : spawn.uid);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  if (impl_->front_end) impl_->front_end->Terminate(kFrontEndGrace);
  ::shutdown(impl_->collector.get(), SHUT_RDWR);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const { return impl_->port; }

pid_t MetricsServer::front_end_pid() const { return impl_->front_end->pid(); }

}  // namespace capsule::metrics
