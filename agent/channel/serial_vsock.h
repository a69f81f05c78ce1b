// SerialVsock: the guest's end of a vsock carried on a virtio-serial port.
// When the VM has no vsock device (vsock.backend serial), the host's
// capsule-vsockd sends vsock packets on the port named
// guest_abi::kVsockSerialPortName; this runs the same VsockMuxer over it on
// a thread of its own, and a host connection to guest port P becomes a
// connection to the unix socket ListenPath(P), where the agent's servers
// listen. Nothing else in the agent knows which transport it is on.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/stream_link.h"

namespace capsule::agent::channel {

// The device node of the virtio-serial port called `name` ("/dev/vport1p1"),
// looked up by name in `sys_dir` (one directory per port, each with a
// `name` file), waiting up to `wait` for it; NotFound when no port has it.
Result<std::string> FindVirtioPort(std::string_view name, std::chrono::milliseconds wait = {},
                                   const std::string& sys_dir = "/sys/class/virtio-ports",
                                   const std::string& dev_dir = "/dev");

class SerialVsock;
using SerialVsockPtr = std::unique_ptr<SerialVsock>;

class SerialVsock {
 public:
  // Opens `port` (a character device, or any stream path open(2) can
  // read and write) and serves it; host streams for port P are connected to
  // "<socket_prefix>_P". Call once the agent's listeners are up: requests
  // the host sent earlier are then answered, not refused.
  static Result<SerialVsockPtr> Start(std::string port, std::string socket_prefix);
  ~SerialVsock();
  SerialVsock(const SerialVsock&) = delete;
  SerialVsock& operator=(const SerialVsock&) = delete;

  // Where a server listens to receive the host's streams to guest port `port`.
  static std::string ListenPath(const std::string& socket_prefix, uint32_t port);

 private:
  SerialVsock(std::string port, std::string socket_prefix, vsock::EventLoopPtr loop)
      : port_(std::move(port)), prefix_(std::move(socket_prefix)), loop_(std::move(loop)) {}
  Status Attach();
  void Reattach();

  std::string port_;
  std::string prefix_;
  vsock::EventLoopPtr loop_;
  vsock::VsockStreamLinkPtr link_;  // loop thread only, after Start
  std::thread thread_;
  log::Logger log_{"serial-vsock"};
};

}  // namespace capsule::agent::channel
