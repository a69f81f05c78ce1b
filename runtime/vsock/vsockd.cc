// capsule-vsockd's process shell: CLI, signals through a signalfd on the
// event loop, the readiness pipe and the pid file.
#include "runtime/vsock/vsockd.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "runtime/vsock/event_loop.h"

namespace capsule::vsock {
namespace {

Result<UniqueFd> BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return ErrnoStatus("sigprocmask");
  // Writes to a closed host socket must fail with EPIPE, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) return ErrnoStatus("signalfd");
  return fd;
}

Status SignalReady(int fd) {
  static constexpr char kReady[] = "READY\n";
  ssize_t n = ::write(fd, kReady, sizeof kReady - 1);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof kReady - 1)) return ErrnoStatus("write readiness fd");
  return Status::Ok();
}

}  // namespace

Status RunVsockd(const VsockdOptions& options) {
  log::Logger log("vsockd");
  ASSIGN_OR_RETURN(UniqueFd sigfd, BlockTerminationSignals());
  ASSIGN_OR_RETURN(EventLoopPtr loop, EventLoop::Create());
  Status why_stopped;
  ASSIGN_OR_RETURN(VsockServicePtr svc, VsockService::Start(*loop, options.service, [&](const Status& why) {
                     why_stopped = why;
                     loop->Stop();
                   }));
  RETURN_IF_ERROR(loop->Add(sigfd.get(), EPOLLIN, [&](uint32_t) {
    signalfd_siginfo si{};
    if (::read(sigfd.get(), &si, sizeof si) == sizeof si)
      log.Info("received signal {}: shutting down", si.ssi_signo);
    loop->Stop();
  }));
  if (!options.pid_file.empty())
    RETURN_IF_ERROR(WriteFileAtomic(options.pid_file, std::to_string(::getpid()) + "\n", 0644, Durability::kVolatile));
  if (options.service.serial_socket.empty())
    log.Info("serving guest cid {}: vhost-user socket {}, hybrid socket {}", options.service.guest_cid,
             options.service.vhost_user_socket, options.service.uds_path);
  else
    log.Info("serving guest cid {}: virtio-serial port socket {}, hybrid socket {}", options.service.guest_cid,
             options.service.serial_socket, options.service.uds_path);
  if (options.ready_fd >= 0) RETURN_IF_ERROR(SignalReady(options.ready_fd));
  Status run = loop->Run();
  loop->Remove(sigfd.get());
  svc.reset();  // closes streams, removes both sockets
  if (!options.pid_file.empty()) ::unlink(options.pid_file.c_str());
  if (!run.ok()) return run;
  if (!why_stopped.ok() && why_stopped.code() != Code::kUnavailable) log.Warn("front end lost: {}", why_stopped.ToString());
  log.Info("stopped; sockets removed");
  return Status::Ok();
}

int VsockdMain(int argc, char** argv) {
  CLI::App app{"capsule-vsockd: the vsock back end for one Capsule VM (QEMU vhost-user-vsock-pci, or a "
               "virtio-serial port carrying vsock packets), exposing the guest's vsock as a hybrid unix socket "
               "(\"CONNECT <port>\\n\" -> \"OK <hostport>\\n\")"};
  app.set_version_flag("--version", std::string("capsule-vsockd ") + kVersion);
  VsockdOptions o;
  std::string level = "info";
  auto* vhost = app.add_option("--vhost-user-socket", o.service.vhost_user_socket,
                               "unix socket QEMU's vhost-user-vsock-pci connects to (-chardev socket,path=...)");
  auto* serial = app.add_option("--serial-socket", o.service.serial_socket,
                                "unix socket QEMU's virtserialport connects to, instead of vhost-user");
  vhost->excludes(serial);
  serial->excludes(vhost);
  app.add_option("--uds-path", o.service.uds_path,
                 "hybrid vsock socket for host programs; guest->host port P connects to <uds-path>_P")
      ->required();
  app.add_option("--guest-cid", o.service.guest_cid, "the guest's vsock CID")->capture_default_str();
  app.add_option("--buf-alloc", o.service.buf_alloc, "receive buffer per stream, bytes")->capture_default_str();
  app.add_option("--ready-fd", o.ready_fd, "write READY to this fd once serving, then close it");
  app.add_option("--pid-file", o.pid_file, "write our pid here while serving");
  app.add_option("--log-level", level, "trace|debug|info|warn|error")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.service.vhost_user_socket.empty() && o.service.serial_socket.empty()) {
    std::fprintf(stderr, "capsule-vsockd: give --vhost-user-socket or --serial-socket\n");
    return 2;
  }
  std::optional<log::Level> lv = log::ParseLevel(level);
  if (!lv) {
    std::fprintf(stderr, "capsule-vsockd: --log-level: '%s' is not trace|debug|info|warn|error\n", level.c_str());
    return 2;
  }
  log::SetLevel(*lv);
  Status s = RunVsockd(o);
  if (!s.ok()) {
    log::Logger("vsockd").Error("{}", s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace capsule::vsock
