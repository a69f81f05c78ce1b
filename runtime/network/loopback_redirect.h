// LoopbackRedirect: in one pod's network namespace, an nftables table that
// sends every TCP connection made to that netns's loopback (127.0.0.0/8,
// and ::1 when asked) to one local port, where the shim's port-forward
// listener learns the original port (SO_ORIGINAL_DST) and carries the
// connection into the VM. containerd's CRI PortForward dials localhost:PORT
// inside the pod netns; for a VM pod nothing listens there but this.
//
//   table inet capsule_portforward {
//     chain output { type nat hook output priority -100; policy accept;
//       meta l4proto tcp ip daddr 127.0.0.0/8 redirect to :P
//       meta l4proto tcp ip6 daddr ::1 redirect to :P } }
//
// Made through libnftables (no nft program is run) while the calling thread
// is inside the netns (NetnsGuard), so no other namespace is ever touched. Removing the
// table on a netns that is already gone is not an error: the table went
// with it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/common/status.h"

namespace capsule::network {

inline constexpr const char* kPortForwardTable = "capsule_portforward";

class LoopbackRedirect {
  struct Token {};

 public:
  // FAILED_PRECONDITION with nftables' own message when the kernel refuses
  // (no nf_tables or nat support); NOT_FOUND naming the netns path.
  static Result<std::unique_ptr<LoopbackRedirect>> Install(const std::string& netns_path, uint16_t to_port,
                                                           bool ipv6);
  LoopbackRedirect(Token, std::string netns_path) : netns_path_(std::move(netns_path)) {}
  ~LoopbackRedirect();  // Remove(), errors logged
  LoopbackRedirect(const LoopbackRedirect&) = delete;
  LoopbackRedirect& operator=(const LoopbackRedirect&) = delete;

  // Deletes the table. Idempotent.
  Status Remove();

 private:
  std::string netns_path_;
  bool removed_ = false;
};

// The nftables script Install runs (for tests and the log).
std::string LoopbackRedirectScript(uint16_t to_port, bool ipv6);

// Runs `script` with libnftables inside `netns_path` (this thread enters it
// and comes back).
// INVALID_ARGUMENT or FAILED_PRECONDITION carrying nftables' error text.
Status RunNftablesIn(const std::string& netns_path, const std::string& script);

}  // namespace capsule::network
