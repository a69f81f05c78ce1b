// CID reservation through the vhost-vsock ioctl and AF_VSOCK dialing.
// Neither can run on the build hosts (no /dev/vhost-vsock there); the unit
// tests cover the error paths, and this follows Kata's FindContextID.
#include "runtime/vsock/kernel_vhost_vsock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/types.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/vsock/unix_socket.h"
#include "runtime/vsock/vsock_service.h"
#include "runtime/vsock/vsock_state.h"

namespace capsule::vsock {
namespace {

// From linux/vhost.h, which cannot be included from C++ (it pulls in
// linux/virtio_ring.h's C-only helpers): VHOST_VIRTIO is 0xAF.
constexpr unsigned long kVhostVsockSetGuestCid = _IOW(0xAF, 0x60, __u64);

class KernelVmVsock : public VmVsock {
 public:
  KernelVmVsock(std::string vm_dir, uint64_t cid, std::string device_id, UniqueFd vhost_fd)
      : vm_dir_(std::move(vm_dir)), cid_(cid), vhost_fd_(std::move(vhost_fd)) {
    device_.driver = "vhost-vsock-pci";
    device_.properties = {{"id", device_id}, {"guest-cid", std::to_string(cid)}};
    if (vhost_fd_) {
      device_.properties.emplace_back("vhostfd", std::to_string(vhost_fd_.get()));
      device_.inherit_fds = {vhost_fd_.get()};
    }
  }
  ~KernelVmVsock() override {
    if (!detached_) (void)Shutdown(std::chrono::milliseconds(0));
  }

  config::VsockBackendKind kind() const override { return config::VsockBackendKind::kVhost; }
  uint64_t guest_cid() const override { return cid_; }
  const QemuVsockDevice& qemu_device() const override { return device_; }
  Result<UniqueFd> Dial(uint32_t port, std::chrono::milliseconds timeout) const override {
    return DialVsock(cid_, port, timeout);
  }
  std::string HostListenPath(uint32_t) const override { return ""; }
  // QEMU holds its own copy of the vhost fd now; ours would keep the CID
  // reserved after QEMU exits.
  void OnQemuStarted() override { vhost_fd_.reset(); }
  Status Shutdown(std::chrono::milliseconds) override {
    vhost_fd_.reset();
    if (!stopped_) ::unlink((vm_dir_ + "/" + kStateFile).c_str());
    stopped_ = true;
    return Status::Ok();
  }
  void Detach() override {
    detached_ = true;
    vhost_fd_.reset();
  }

 private:
  std::string vm_dir_;
  uint64_t cid_;
  UniqueFd vhost_fd_;
  QemuVsockDevice device_;
  bool detached_ = false;
  bool stopped_ = false;
};

}  // namespace

Result<UniqueFd> DialVsock(uint64_t cid, uint32_t port, std::chrono::milliseconds timeout) {
  std::string what = fmt::format("vsock {}:{}", cid, port);
  UniqueFd fd(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoStatus("socket(AF_VSOCK) for " + what);
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = static_cast<unsigned int>(cid);
  addr.svm_port = port;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return Status(Code::kUnavailable, ErrnoStatus("connect " + what).message());
    RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, timeout, what.c_str()));
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return ErrnoStatus("SO_ERROR of " + what);
    if (err != 0) return Status(Code::kUnavailable, ErrnoStatus("connect " + what, err).message());
  }
  RETURN_IF_ERROR(SetNonBlocking(fd.get(), false));
  return fd;
}

Result<VmVsockPtr> KernelVhostVsock::Prepare(const VmVsockSpec& spec) {
  struct stat st{};
  if (::stat(spec.vm_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return InvalidArgument("vsock: VM directory " + spec.vm_dir + " does not exist");
  const std::string& dev = options_.vhost_vsock_device;
  UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + dev);
  uint64_t first = spec.guest_cid == 0 ? kMinGuestCid : spec.guest_cid;
  uint32_t probes = spec.guest_cid == 0 ? kMaxCidProbes : 1;
  for (uint64_t cid = first; cid < first + probes && cid <= kMaxGuestCid; ++cid) {
    uint64_t v = cid;
    if (::ioctl(fd.get(), kVhostVsockSetGuestCid, &v) == 0) {
      VsockState s;
      s.backend = config::VsockBackendKind::kVhost;
      s.guest_cid = cid;
      s.device_id = spec.device_id;
      RETURN_IF_ERROR(WriteVsockState(spec.vm_dir, s));
      return VmVsockPtr(new KernelVmVsock(spec.vm_dir, cid, spec.device_id, std::move(fd)));
    }
    if (errno != EADDRINUSE)
      return ErrnoStatus(fmt::format("ioctl VHOST_VSOCK_SET_GUEST_CID {} on {}", cid, dev));
  }
  if (spec.guest_cid != 0) return AlreadyExists(fmt::format("guest cid {} is in use on {}", spec.guest_cid, dev));
  return ResourceExhausted(fmt::format("no free guest cid in {}..{} on {}", first, first + probes - 1, dev));
}

Result<VmVsockPtr> KernelVhostVsock::Adopt(const std::string& vm_dir) {
  ASSIGN_OR_RETURN(VsockState s, ReadVsockState(vm_dir));
  if (s.backend != config::VsockBackendKind::kVhost)
    return FailedPrecondition(vm_dir + ": vsock backend is " + std::string(config::VsockBackendName(s.backend)) +
                              ", not vhost");
  return VmVsockPtr(new KernelVmVsock(vm_dir, s.guest_cid, s.device_id, UniqueFd()));
}

}  // namespace capsule::vsock
