// The port stays ours for the VM's life. A lost link (the host end closed
// or sent garbage) closes every stream; the port is opened again after a
// pause, as the host may come back (a restored clone's QEMU connects its
// own back end before the guest runs, so a clone never sees that gap).
#include "agent/channel/serial_vsock.h"

#include <fcntl.h>

#include <fmt/format.h>

#include "agent/system/sysfs_lookup.h"
#include "runtime/vsock/vsock_packet.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::channel {
namespace {

constexpr std::chrono::milliseconds kReattachPause{100};

}  // namespace

Result<std::string> FindVirtioPort(std::string_view name, std::chrono::milliseconds wait, const std::string& sys_dir,
                                   const std::string& dev_dir) {
  ASSIGN_OR_RETURN(std::string port, system::FindSysfsEntry(sys_dir, "name", name, wait));
  return fmt::format("{}/{}", dev_dir, port);
}

std::string SerialVsock::ListenPath(const std::string& socket_prefix, uint32_t port) {
  return fmt::format("{}_{}", socket_prefix, port);
}

Result<SerialVsockPtr> SerialVsock::Start(std::string port, std::string socket_prefix) {
  ASSIGN_OR_RETURN(vsock::EventLoopPtr loop, vsock::EventLoop::Create());
  SerialVsockPtr sv(new SerialVsock(std::move(port), std::move(socket_prefix), std::move(loop)));
  RETURN_IF_ERROR(sv->Attach());
  SerialVsock* self = sv.get();
  sv->thread_ = std::thread([self] {
    Status s = self->loop_->Run();
    if (!s.ok()) self->log_.Error("event loop: {}", s.ToString());
  });
  return sv;
}

SerialVsock::~SerialVsock() {
  if (thread_.joinable()) {
    loop_->Stop();
    thread_.join();
  }
  link_.reset();
}

Status SerialVsock::Attach() {
  UniqueFd fd(::open(port_.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY));
  if (!fd) return ErrnoStatus("open the vsock port " + port_);
  vsock::VsockMuxer::Options o;
  o.local_cid = guest_abi::kSerialVsockGuestCid;
  o.peer_cid = vsock::kHostCid;
  o.uds_path = prefix_;
  ASSIGN_OR_RETURN(link_, vsock::VsockStreamLink::Start(*loop_, std::move(fd), o, [this](const Status& why) {
                     // While no host end is connected every open ends at once:
                     // say so once, not every pause.
                     if (link_ && link_->bytes_in() > 0)
                       log_.Warn("host link on {} lost: {}; opening it again", port_, why.message());
                     else
                       log_.Debug("host link on {}: {}", port_, why.message());
                     Reattach();
                   }));
  log_.Info("host streams on {} go to {}_<port>", port_, prefix_);
  return Status::Ok();
}

void SerialVsock::Reattach() {
  link_.reset();
  loop_->AddTimer(vsock::EventLoop::Clock::now() + kReattachPause, [this] {
    Status s = Attach();
    if (!s.ok()) {
      log_.Error("{}", s.ToString());
      Reattach();
    }
  });
}

}  // namespace capsule::agent::channel
