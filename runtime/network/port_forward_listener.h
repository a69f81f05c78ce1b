// PortForwardListener: the host end of `kubectl port-forward` for a VM pod.
// containerd's CRI PortForward enters the pod's netns and dials
// localhost:PORT there (tcp4, then tcp6). This listens on the netns's
// loopback (127.0.0.1 and ::1, one ephemeral port), has every loopback TCP
// connection of that netns redirected to it (LoopbackRedirect), reads each
// one's original destination (SO_ORIGINAL_DST) and carries it into the VM:
// `dial` opens a stream to the agent's forwarder (vsock, token proved), the
// FORWARD line names the port (port_forward_wire.h), and bytes are relayed
// both ways. A port nothing listens on in the guest is answered with a TCP
// reset, what a client of a closed port on a node sees after its connect.
//
// Threads: one accepts; one per forwarded connection, at most
// PortForwardOptions::max_connections (more are reset at once).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/network/loopback_redirect.h"

namespace capsule::network {

struct PortForwardOptions {
  size_t max_connections = 256;
  std::chrono::milliseconds guest_timeout{10000};  // dial + FORWARD reply
};

class PortForwardListener {
  struct Token {};

 public:
  // A new stream to the agent's forwarder, past the token handshake.
  using Dial = std::function<Result<UniqueFd>(std::chrono::milliseconds timeout)>;

  // Listens in `netns_path` and installs the redirect. On failure nothing
  // is left in the netns. `label` names the pod in logs.
  static Result<std::unique_ptr<PortForwardListener>> Start(const std::string& netns_path, Dial dial,
                                                            std::string label, PortForwardOptions options = {});
  explicit PortForwardListener(Token) {}
  ~PortForwardListener();  // Stop()
  PortForwardListener(const PortForwardListener&) = delete;
  PortForwardListener& operator=(const PortForwardListener&) = delete;

  uint16_t port() const { return port_; }
  bool ipv6() const { return static_cast<bool>(listen6_); }

  // Stops accepting, resets every forwarded connection, removes the
  // redirect. Idempotent.
  Status Stop();

 private:
  void AcceptLoop();
  void Forward(UniqueFd conn, int family);

  std::string label_;
  Dial dial_;
  PortForwardOptions options_;
  uint16_t port_ = 0;
  UniqueFd listen4_;
  UniqueFd listen6_;
  UniqueFd stop_;  // eventfd: readable once Stop begins
  std::unique_ptr<LoopbackRedirect> redirect_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable idle_;
  size_t active_ = 0;   // guarded by mu_
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace capsule::network
