// Starting, adopting and stopping capsule-vsockd for a VM. The daemon says
// READY on a pipe once both its sockets accept, so QEMU (a socket client)
// can start right after Prepare returns.
#include "runtime/vsock/vsockd_vsock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "runtime/host/daemon.h"
#include "runtime/vsock/hybrid_dial.h"
#include "runtime/vsock/vsock_service.h"
#include "runtime/wire/guest_abi.h"

#ifndef CAPSULE_INSTALL_BINDIR
#define CAPSULE_INSTALL_BINDIR "/usr/local/bin"
#endif

namespace capsule::vsock {
namespace {

constexpr std::chrono::milliseconds kDefaultGrace{2000};
constexpr const char* kVsockdName = "capsule-vsockd";
// Longest "_<port>" suffix a guest->host socket path gets.
constexpr size_t kPortSuffixMax = 11;

std::string Dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

bool Executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

Status CheckSocketPath(const std::string& p, size_t extra) {
  if (p.size() + extra >= sizeof(sockaddr_un{}.sun_path))
    return InvalidArgument(fmt::format("socket path {} is too long for a unix socket ({} bytes max)", p,
                                       sizeof(sockaddr_un{}.sun_path) - 1 - extra));
  return Status::Ok();
}

Status CheckDeviceId(const std::string& id) {
  bool ok = !id.empty() && std::isalpha(static_cast<unsigned char>(id[0]));
  for (char c : id) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  if (!ok) return InvalidArgument("vsock device id '" + id + "' is not a QEMU id (letter, then letters, digits, -_.)");
  return Status::Ok();
}

std::string LogTail(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok() || text->empty()) return "(no log)";
  constexpr size_t kTail = 1500;
  return text->size() > kTail ? "..." + text->substr(text->size() - kTail) : *text;
}

QemuVsockDevice DeviceFor(const VsockState& s) {
  QemuVsockDevice d;
  d.chardev_id = s.device_id + "-chr";
  if (s.backend == config::VsockBackendKind::kSerial) {
    d.driver = "virtserialport";
    d.bus_driver = "virtio-serial-pci";
    d.chardev_path = s.serial_socket;
    d.properties = {{"id", s.device_id},
                    {"bus", s.device_id + "-bus.0"},
                    {"chardev", d.chardev_id},
                    {"name", std::string(guest_abi::kVsockSerialPortName)}};
    return d;
  }
  d.driver = "vhost-user-vsock-pci";
  d.chardev_path = s.vhost_user_socket;
  d.properties = {{"id", s.device_id}, {"chardev", d.chardev_id}};
  d.needs_shared_memory = true;
  return d;
}

// Waits for "READY\n" on `ready`, or for the daemon to die first.
Status WaitReady(int ready, int pidfd, std::chrono::milliseconds timeout, const std::string& log_path) {
  pollfd fds[2] = {{ready, POLLIN, 0}, {pidfd, POLLIN, 0}};
  int rc;
  do {
    rc = ::poll(fds, 2, static_cast<int>(timeout.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return ErrnoStatus("poll capsule-vsockd readiness");
  if (rc == 0) return DeadlineExceeded(fmt::format("capsule-vsockd not ready within {} ms; log: {}", timeout.count(),
                                                   LogTail(log_path)));
  char buf[16] = {};
  ssize_t n = (fds[0].revents & POLLIN) ? ::read(ready, buf, sizeof buf - 1) : 0;
  if (n > 0 && std::string_view(buf, static_cast<size_t>(n)).substr(0, 5) == "READY") return Status::Ok();
  return Unavailable("capsule-vsockd exited before it was ready; log: " + LogTail(log_path));
}

}  // namespace

Result<std::string> VsockdVsock::VsockdPath() const {
  if (!options_.vsockd_path.empty()) {
    if (Executable(options_.vsockd_path)) return options_.vsockd_path;
    return NotFound("capsule-vsockd at " + options_.vsockd_path + " is missing or not executable");
  }
  std::vector<std::string> tried;
  if (const char* env = std::getenv("CAPSULE_VSOCKD")) tried.emplace_back(env);
  if (auto self = SelfExePath(); self.ok()) tried.push_back(Dirname(*self) + "/" + kVsockdName);
  if (const char* build = std::getenv("CAPSULE_BUILD_DIR"))
    tried.push_back(std::string(build) + "/runtime/vsock/" + kVsockdName);
  tried.push_back(std::string(CAPSULE_INSTALL_BINDIR) + "/" + kVsockdName);
  for (const std::string& p : tried) {
    if (Executable(p)) return p;
  }
  std::string list;
  for (const std::string& p : tried) list += (list.empty() ? "" : ", ") + p;
  return NotFound("capsule-vsockd not found (tried " + list + "); set CAPSULE_VSOCKD");
}

Result<VmVsockPtr> VsockdVsock::Prepare(const VmVsockSpec& spec) {
  struct stat st{};
  if (::stat(spec.vm_dir.c_str(), &st) != 0) return ErrnoStatus("vsock: VM directory " + spec.vm_dir);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("vsock: " + spec.vm_dir + " is not a directory");
  RETURN_IF_ERROR(CheckDeviceId(spec.device_id));
  VsockState s;
  s.backend = kind_;
  const bool serial = kind_ == config::VsockBackendKind::kSerial;
  // A serial link joins one guest to one host: its CID names nothing.
  s.guest_cid = serial ? guest_abi::kSerialVsockGuestCid : spec.guest_cid == 0 ? kMinGuestCid : spec.guest_cid;
  if (s.guest_cid < kMinGuestCid || s.guest_cid > kMaxGuestCid)
    return InvalidArgument(fmt::format("vsock: guest cid {} outside {}..{}", s.guest_cid, kMinGuestCid, kMaxGuestCid));
  s.device_id = spec.device_id;
  (serial ? s.serial_socket : s.vhost_user_socket) =
      spec.vm_dir + "/" + (serial ? kSerialSocketName : kVhostUserSocketName);
  s.hybrid_socket = spec.vm_dir + "/" + kHybridSocketName;
  RETURN_IF_ERROR(CheckSocketPath(serial ? s.serial_socket : s.vhost_user_socket, 0));
  RETURN_IF_ERROR(CheckSocketPath(s.hybrid_socket, kPortSuffixMax));
  ASSIGN_OR_RETURN(std::string bin, VsockdPath());

  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe for capsule-vsockd readiness");
  UniqueFd ready_r(p[0]), ready_w(p[1]);
  std::string log_path = spec.vm_dir + "/" + kVsockdLogName;
  UniqueFd log_fd(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!log_fd) return ErrnoStatus("open " + log_path);
  DaemonOptions d;
  d.argv = {bin, serial ? "--serial-socket" : "--vhost-user-socket", serial ? s.serial_socket : s.vhost_user_socket,
            "--uds-path", s.hybrid_socket, "--guest-cid",
            std::to_string(s.guest_cid), "--ready-fd", std::to_string(ready_w.get()), "--pid-file",
            spec.vm_dir + "/" + kVsockdPidName, "--log-level", std::string(log::LevelName(options_.vsockd_log_level))};
  d.stdout_fd = log_fd.get();
  d.stderr_fd = log_fd.get();
  d.keep_fds = {ready_w.get()};
  ASSIGN_OR_RETURN(Daemon daemon, SpawnDaemon(d));
  ready_w.reset();
  s.vsockd_pid = daemon.pid;
  // From here on the object owns the daemon: its destructor stops it.
  auto vsock = std::make_unique<VsockdVmVsock>(s, spec.vm_dir, std::move(daemon.pidfd));
  Status ready = WaitReady(ready_r.get(), vsock->vsockd_pidfd(), options_.start_timeout, log_path);
  if (!ready.ok()) return ready.WithContext("start capsule-vsockd for " + spec.vm_dir);
  RETURN_IF_ERROR(WriteVsockState(spec.vm_dir, s));
  return VmVsockPtr(std::move(vsock));
}

Result<VmVsockPtr> VsockdVsock::Adopt(const std::string& vm_dir) {
  ASSIGN_OR_RETURN(VsockState s, ReadVsockState(vm_dir));
  if (s.backend != kind_)
    return FailedPrecondition(vm_dir + ": vsock backend is " + std::string(config::VsockBackendName(s.backend)) +
                              ", not " + std::string(config::VsockBackendName(kind_)));
  // Known by its --uds-path argument: the pid may name another process now.
  Result<UniqueFd> pidfd = OpenProcessWithArgument(s.vsockd_pid, s.hybrid_socket);
  if (!pidfd.ok())
    return Unavailable(fmt::format("capsule-vsockd (pid {}) of {} is not running: {}", s.vsockd_pid, vm_dir,
                                   pidfd.status().message()));
  return VmVsockPtr(new VsockdVmVsock(s, vm_dir, std::move(*pidfd)));
}

VsockdVmVsock::VsockdVmVsock(VsockState state, std::string vm_dir, UniqueFd pidfd)
    : state_(std::move(state)), vm_dir_(std::move(vm_dir)), device_(DeviceFor(state_)), pidfd_(std::move(pidfd)) {}

VsockdVmVsock::~VsockdVmVsock() {
  if (!detached_ && !stopped_) (void)Shutdown(kDefaultGrace);
}

Result<UniqueFd> VsockdVmVsock::Dial(uint32_t port, std::chrono::milliseconds timeout) const {
  ASSIGN_OR_RETURN(HybridStream s, DialHybrid(state_.hybrid_socket, port, timeout));
  return std::move(s.fd);
}

std::string VsockdVmVsock::HostListenPath(uint32_t port) const {
  return state_.hybrid_socket + "_" + std::to_string(port);
}

Status VsockdVmVsock::Shutdown(std::chrono::milliseconds grace) {
  if (stopped_) return Status::Ok();
  stopped_ = true;
  Status result;
  if (pidfd_) {
    (void)PidfdSignal(pidfd_.get(), SIGTERM);
    if (!PidfdWait(pidfd_.get(), static_cast<int>(grace.count()))) {
      result = DeadlineExceeded(fmt::format("capsule-vsockd (pid {}) ignored SIGTERM for {} ms; killed",
                                            state_.vsockd_pid, grace.count()));
      (void)PidfdSignal(pidfd_.get(), SIGKILL);
      (void)PidfdWait(pidfd_.get(), static_cast<int>(kDefaultGrace.count()));
    }
  }
  RemoveFiles();
  return result;
}

void VsockdVmVsock::RemoveFiles() {
  // A clean exit removed the sockets and pid file already; a killed one did not.
  for (const std::string& p : {state_.vhost_user_socket, state_.serial_socket, state_.hybrid_socket,
                               vm_dir_ + "/" + kVsockdPidName,
                               vm_dir_ + "/" + kStateFile})
    if (!p.empty()) ::unlink(p.c_str());
}

void VsockdVmVsock::Detach() { detached_ = true; }

}  // namespace capsule::vsock
