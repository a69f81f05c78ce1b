// TapRedirect: a tap next to the pod's CNI veth, in the pod's netns, with
// every frame mirrored both ways by tc (Kata's "tcfilter" model): an ingress
// qdisc on each of the two, and a u32 match-all filter whose mirred action
// redirects to the other's egress. The tap's fd goes to the VMM (QMP
// getfd), whose virtio-net NIC then is the pod's interface.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::network {

// Names of the taps we create; ReadNetns skips them.
inline constexpr const char* kTapPrefix = "tap_cap";  // e.g. "tap_cap0"

class TapRedirect {
 public:
  // In the netns: creates tap `tap_name` (/dev/net/tun, IFF_TAP | IFF_NO_PI
  // | IFF_VNET_HDR, MTU = the veth's, up), adds an ingress qdisc to both,
  // and the two redirecting filters. On any failure everything done so far
  // is undone. Errors name the netns, the interface and the step.
  static Result<TapRedirect> Create(const std::string& netns_path, const std::string& veth_name,
                                    const std::string& tap_name);

  // A tap a VMM already holds (opened by name in `source_netns`, e.g. its
  // own /proc/<pid>/ns/net): moved into `netns_path` under `tap_name`, then
  // set up and mirrored with `veth_name` as Create does. The fd stays the
  // VMM's (tap_fd() is -1). A tap may change netns while its fd is open;
  // the NIC on it keeps working. On a failure after the move the tap is
  // deleted (its NIC then carries nothing); before it, it stays where it was.
  static Result<TapRedirect> AdoptTap(const std::string& source_netns, const std::string& source_tap,
                                      const std::string& netns_path, const std::string& veth_name,
                                      const std::string& tap_name);

  // What AdoptTap checks before it moves anything, without moving: the VMM's
  // tap is in `source_netns`, the veth in `netns_path`, and no `tap_name`
  // there yet. A caller decides on the tap with this, and runs the move
  // (the kernel's netns change: 14-22 ms here) beside other work.
  static Status CheckAdoptable(const std::string& source_netns, const std::string& source_tap,
                               const std::string& netns_path, const std::string& veth_name,
                               const std::string& tap_name);

  TapRedirect(TapRedirect&& other) noexcept;
  TapRedirect& operator=(TapRedirect&& other) noexcept;
  TapRedirect(const TapRedirect&) = delete;
  TapRedirect& operator=(const TapRedirect&) = delete;
  ~TapRedirect();

  // The tun fd (for the VMM); stays owned by this object. -1 after Remove()
  // and for an adopted tap.
  int tap_fd() const { return tap_fd_.get(); }
  const std::string& tap_name() const { return tap_name_; }
  const std::string& veth_name() const { return veth_name_; }
  const std::string& netns_path() const { return netns_path_; }

  // Deletes the veth's ingress qdisc (and with it its filter) and the tap
  // (with its own qdisc and filter), then closes the fd. A netns or
  // interface that is already gone is not an error. Idempotent; the
  // destructor calls it and logs a failure.
  Status Remove();

 private:
  TapRedirect(std::string netns_path, std::string veth_name, std::string tap_name, UniqueFd fd)
      : netns_path_(std::move(netns_path)), veth_name_(std::move(veth_name)), tap_name_(std::move(tap_name)),
        tap_fd_(std::move(fd)) {}

  std::string netns_path_;
  std::string veth_name_;
  std::string tap_name_;
  UniqueFd tap_fd_;
  bool active_ = false;  // filters and tap exist and Remove() has work to do
};

}  // namespace capsule::network
