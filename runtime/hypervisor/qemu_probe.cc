// Probing runs QEMU as our own short-lived child with one end of a socketpair
// as its QMP monitor; QEMU's stderr goes to a pipe that becomes part of any
// error ("probe QEMU /usr/bin/qemu: ...: <what QEMU printed>").
#include "runtime/hypervisor/qemu_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"
#include "runtime/hypervisor/qmp_client.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
const log::Logger kQemuProbeLog("hypervisor");

std::string DrainPipe(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 8192) break;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

Result<QemuCapabilities> AskQemu(QmpClient& qmp) {
  QemuCapabilities caps;
  caps.version = qmp.greeting().VersionString();
  caps.package = qmp.greeting().package;
  // An unknown option group answers GenericError "invalid option name".
  auto sandbox = qmp.Execute("query-command-line-options", json{{"option", "sandbox"}});
  if (!sandbox.ok() && sandbox.status().code() != Code::kFailedPrecondition) return sandbox.status();
  caps.sandbox = sandbox.ok();
  (void)qmp.Execute("quit");
  return caps;
}

// The binary's identity for the cache.
Result<json> BinaryKey(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  return json{{"path", path}, {"ino", static_cast<uint64_t>(st.st_ino)}, {"size", static_cast<uint64_t>(st.st_size)},
              {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}};
}

}  // namespace

Result<QemuCapabilities> ProbeQemu(const std::string& qemu_path, std::chrono::milliseconds timeout) {
  std::string what = "probe QEMU " + qemu_path;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus(what + ": socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC) != 0) return ErrnoStatus(what + ": pipe2");
  UniqueFd err_read(ep[0]), err_write(ep[1]);
  SpawnOptions o;
  o.argv = {qemu_path, "-M", "none", "-nodefaults", "-no-user-config", "-display", "none", "-S", "-chardev",
            fmt::format("socket,id=qmp,fd={}", theirs.get()), "-mon", "chardev=qmp,mode=control"};
  o.keep_fds = {theirs.get()};
  o.stderr_fd = err_write.get();
  o.die_with_parent = true;
  auto child = ChildProcess::Spawn(o);
  if (!child.ok()) return child.status().WithContext(what);
  theirs.reset();
  err_write.reset();
  QmpClient::Options qo;
  qo.handshake_timeout = timeout;
  qo.abort_fd = child->pidfd();
  qo.peer = what;
  auto caps = [&]() -> Result<QemuCapabilities> {
    ASSIGN_OR_RETURN(auto qmp, QmpClient::Open(std::move(ours), qo));
    return AskQemu(*qmp);
  }();
  if (!child->Wait(timeout).ok()) child->Terminate(std::chrono::milliseconds(0));
  if (!caps.ok()) {
    std::string said = DrainPipe(err_read.get());
    return caps.status().WithMessage(caps.status().message() + (said.empty() ? "" : ": QEMU said: " + said));
  }
  return caps;
}

Result<QemuCapabilities> ProbeQemuCached(const std::string& qemu_path, const std::string& cache_file,
                                         std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(json key, BinaryKey(qemu_path));
  if (auto text = ReadFile(cache_file); text.ok()) {
    json cached = json::parse(*text, nullptr, false);
    if (cached.is_object() && cached.value("binary", json()) == key && cached["version"].is_string() &&
        cached["sandbox"].is_boolean()) {
      return QemuCapabilities{cached["version"].get<std::string>(), cached.value("package", ""),
                              cached["sandbox"].get<bool>()};
    }
  }
  ASSIGN_OR_RETURN(QemuCapabilities caps, ProbeQemu(qemu_path, timeout));
  json out = {{"binary", key}, {"version", caps.version}, {"package", caps.package}, {"sandbox", caps.sandbox}};
  size_t slash = cache_file.rfind('/');
  Status st = slash == std::string::npos ? Status::Ok() : MkdirAll(cache_file.substr(0, slash), 0755);
  if (st.ok()) st = WriteFileAtomic(cache_file, out.dump(2) + "\n");
  if (!st.ok()) kQemuProbeLog.Warn("cannot cache QEMU capabilities: {}", st.ToString());
  kQemuProbeLog.Info("QEMU {} ({}): version {}, -sandbox {}", qemu_path, caps.package, caps.version,
                     caps.sandbox ? "supported" : "not supported");
  return caps;
}

}  // namespace capsule::hypervisor
