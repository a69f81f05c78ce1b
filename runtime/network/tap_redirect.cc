// TapRedirect: create and remove the tap and its two-way tc mirror inside
// the pod's netns. Creation is a short sequence of steps; a failing step
// undoes the ones before it before the error goes back, so a failed Create
// leaves the netns as it found it.
#include "runtime/network/tap_redirect.h"

#include <fmt/format.h>
#include <linux/if.h>
#include <linux/magic.h>
#include <netlink/errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>

#include "runtime/common/logging.h"
#include "runtime/netlink/netlink_socket.h"
#include "runtime/network/netns.h"
#include "runtime/network/tap_device.h"
#include "runtime/network/tc.h"

namespace capsule::network {
namespace {

using netlink::LinkPtr;
using netlink::NetlinkSocket;

const log::Logger kTapRedirectLog("network");

Result<LinkPtr> GetLink(NetlinkSocket& sock, const std::string& name) {
  rtnl_link* link = nullptr;
  sock.ResetError();
  int rc = rtnl_link_get_kernel(sock.get(), 0, name.c_str(), &link);
  if (rc < 0) {
    if (sock.last_errno() == ENODEV || rc == -NLE_OBJ_NOTFOUND) return NotFound("interface " + name + " does not exist");
    return sock.Check(rc, "interface " + name);
  }
  return LinkPtr(link);
}

Status SetMtuAndUp(NetlinkSocket& sock, rtnl_link* link, uint32_t mtu) {
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_set_mtu(change.get(), mtu);
  rtnl_link_set_flags(change.get(), IFF_UP);
  sock.ResetError();
  return sock.Check(rtnl_link_change(sock.get(), link, change.get(), 0), fmt::format("set mtu {} and up", mtu));
}

// NOT_FOUND when the interface does not exist (any more).
Status DeleteLink(NetlinkSocket& sock, const std::string& name) {
  LinkPtr link(rtnl_link_alloc());
  if (!link) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_set_name(link.get(), name.c_str());
  sock.ResetError();
  Status st = sock.Check(rtnl_link_delete(sock.get(), link.get()), "delete interface " + name);
  if (!st.ok() && sock.last_errno() == ENODEV) return NotFound(name + " does not exist");
  return st;
}

// Whether `path` still names a network namespace: containerd unmounts the
// nsfs file and then unlinks it, so both a missing file and a plain file
// mean the netns (and every interface in it) is gone.
bool NetnsExists(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == static_cast<decltype(fs.f_type)>(NSFS_MAGIC);
}

// What Create has done so far, for the undo on failure.
struct Progress {
  int veth_index = 0;
  bool veth_qdisc = false;
  bool tap_made = false;
};

void Undo(NetlinkSocket& sock, const Progress& p, const std::string& tap_name) {
  if (p.veth_qdisc) {
    if (Status st = DeleteIngressQdisc(sock, p.veth_index); !st.ok()) kTapRedirectLog.Warn("undo: {}", st.ToString());
  }
  // The tap's own qdisc and filter go with it.
  if (p.tap_made) {
    if (Status st = DeleteLink(sock, tap_name); !st.ok() && st.code() != Code::kNotFound)
      kTapRedirectLog.Warn("undo: {}", st.ToString());
  }
}

// The tc mirror between an existing tap and the veth, the tap up with the
// veth's MTU.
Status Mirror(NetlinkSocket& sock, const LinkPtr& veth, const std::string& veth_name, const std::string& tap_name,
              Progress& p) {
  ASSIGN_OR_RETURN(LinkPtr tap, GetLink(sock, tap_name));
  const int tap_index = rtnl_link_get_ifindex(tap.get());
  RETURN_IF_ERROR_CTX(SetMtuAndUp(sock, tap.get(), rtnl_link_get_mtu(veth.get())), "tap " + tap_name);
  RETURN_IF_ERROR_CTX(AddIngressQdisc(sock, p.veth_index), "veth " + veth_name);
  p.veth_qdisc = true;
  RETURN_IF_ERROR_CTX(AddIngressQdisc(sock, tap_index), "tap " + tap_name);
  RETURN_IF_ERROR_CTX(AddRedirectFilter(sock, p.veth_index, tap_index), "veth " + veth_name);
  RETURN_IF_ERROR_CTX(AddRedirectFilter(sock, tap_index, p.veth_index), "tap " + tap_name);
  return Status::Ok();
}

// The steps of Create, each error naming its step and interface.
Result<UniqueFd> Setup(NetlinkSocket& sock, const std::string& veth_name, const std::string& tap_name, Progress& p) {
  ASSIGN_OR_RETURN(LinkPtr veth, GetLink(sock, veth_name));
  p.veth_index = rtnl_link_get_ifindex(veth.get());
  if (GetLink(sock, tap_name).ok()) return AlreadyExists("interface " + tap_name + " already exists");
  auto fd = CreateTap(tap_name);
  if (!fd.ok()) return std::move(fd).status().WithContext("create tap");
  p.tap_made = true;
  RETURN_IF_ERROR(Mirror(sock, veth, veth_name, tap_name, p));
  return std::move(*fd);
}

// Moves link `name` of `source_netns` into
// the netns open as `target`, renamed `new_name` in the same request.
Status MoveLink(const std::string& source_netns, const std::string& name, int target, const std::string& new_name) {
  ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(source_netns));
  ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
  ASSIGN_OR_RETURN(LinkPtr link, GetLink(*sock, name));
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_set_ns_fd(change.get(), target);
  rtnl_link_set_name(change.get(), new_name.c_str());
  sock->ResetError();
  return sock->Check(rtnl_link_change(sock->get(), link.get(), change.get(), 0),
                     fmt::format("move interface {} out of netns {}", name, source_netns));
}

}  // namespace

Result<TapRedirect> TapRedirect::Create(const std::string& netns_path, const std::string& veth_name,
                                        const std::string& tap_name) {
  const std::string ctx = fmt::format("tap redirect {} <-> {} in netns {}", veth_name, tap_name, netns_path);
  if (tap_name.rfind(kTapPrefix, 0) != 0)
    return InvalidArgument(fmt::format("{}: tap name must start with '{}' (ReadNetns skips those)", ctx, kTapPrefix));
  auto fd = [&]() -> Result<UniqueFd> {
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
    ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
    Progress progress;
    auto tap_fd = Setup(*sock, veth_name, tap_name, progress);
    if (!tap_fd.ok()) Undo(*sock, progress, tap_name);
    return tap_fd;  // on failure the fd closes here, after Undo, still in the netns
  }();
  if (!fd.ok()) return std::move(fd).status().WithContext(ctx);
  TapRedirect r(netns_path, veth_name, tap_name, std::move(*fd));
  r.active_ = true;
  kTapRedirectLog.Info("{}: created (tap fd {})", ctx, r.tap_fd());
  return r;
}

Status TapRedirect::CheckAdoptable(const std::string& source_netns, const std::string& source_tap,
                                   const std::string& netns_path, const std::string& veth_name,
                                   const std::string& tap_name) {
  const std::string ctx = fmt::format("tap redirect {} <-> {} (tap {} of netns {}) in netns {}", veth_name, tap_name,
                                      source_tap, source_netns, netns_path);
  Status st = [&]() -> Status {
    {
      ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
      ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
      RETURN_IF_ERROR(GetLink(*sock, veth_name).status());
      if (GetLink(*sock, tap_name).ok()) return AlreadyExists("interface " + tap_name + " already exists");
    }
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(source_netns));
    ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
    return GetLink(*sock, source_tap).status();
  }();
  return st.ok() ? st : std::move(st).WithContext(ctx);
}

Result<TapRedirect> TapRedirect::AdoptTap(const std::string& source_netns, const std::string& source_tap,
                                          const std::string& netns_path, const std::string& veth_name,
                                          const std::string& tap_name) {
  const std::string ctx = fmt::format("tap redirect {} <-> {} (tap {} of netns {}) in netns {}", veth_name, tap_name,
                                      source_tap, source_netns, netns_path);
  if (tap_name.rfind(kTapPrefix, 0) != 0)
    return InvalidArgument(fmt::format("{}: tap name must start with '{}' (ReadNetns skips those)", ctx, kTapPrefix));
  UniqueFd target(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target) return ErrnoStatus("open netns " + netns_path).WithContext(ctx);
  Status st = [&]() -> Status {
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
    ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
    ASSIGN_OR_RETURN(LinkPtr veth, GetLink(*sock, veth_name));
    if (GetLink(*sock, tap_name).ok()) return AlreadyExists("interface " + tap_name + " already exists");
    RETURN_IF_ERROR(MoveLink(source_netns, source_tap, target.get(), tap_name));
    Progress progress;
    progress.veth_index = rtnl_link_get_ifindex(veth.get());
    progress.tap_made = true;
    Status mirrored = Mirror(*sock, veth, veth_name, tap_name, progress);
    if (!mirrored.ok()) Undo(*sock, progress, tap_name);
    return mirrored;
  }();
  if (!st.ok()) return std::move(st).WithContext(ctx);
  TapRedirect r(netns_path, veth_name, tap_name, UniqueFd());
  r.active_ = true;
  kTapRedirectLog.Info("{}: moved and mirrored", ctx);
  return r;
}

TapRedirect::TapRedirect(TapRedirect&& other) noexcept
    : netns_path_(std::move(other.netns_path_)), veth_name_(std::move(other.veth_name_)),
      tap_name_(std::move(other.tap_name_)), tap_fd_(std::move(other.tap_fd_)),
      active_(std::exchange(other.active_, false)) {}

TapRedirect& TapRedirect::operator=(TapRedirect&& other) noexcept {
  if (this == &other) return *this;
  if (Status st = Remove(); !st.ok()) kTapRedirectLog.Error("{}", st.ToString());
  netns_path_ = std::move(other.netns_path_);
  veth_name_ = std::move(other.veth_name_);
  tap_name_ = std::move(other.tap_name_);
  tap_fd_ = std::move(other.tap_fd_);
  active_ = std::exchange(other.active_, false);
  return *this;
}

TapRedirect::~TapRedirect() {
  if (Status st = Remove(); !st.ok()) kTapRedirectLog.Error("{}", st.ToString());
}

Status TapRedirect::Remove() {
  if (!active_) return Status::Ok();
  const std::string ctx = fmt::format("remove tap redirect {} <-> {} in netns {}", veth_name_, tap_name_, netns_path_);
  if (NetnsExists(netns_path_)) {
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path_));
    auto sock = NetlinkSocket::Open();
    if (!sock.ok()) return std::move(sock).status().WithContext(ctx);
    // The veth may be gone already (CNI DEL first): its qdisc went with it.
    if (auto veth = GetLink(**sock, veth_name_); veth.ok()) {
      // ENOENT/EINVAL: no ingress qdisc (any more) on it.
      Status st = DeleteIngressQdisc(**sock, rtnl_link_get_ifindex(veth->get()));
      const int err = (*sock)->last_errno();
      if (!st.ok() && err != ENOENT && err != EINVAL) return std::move(st).WithContext(ctx + ": veth " + veth_name_);
    }
    Status st = DeleteLink(**sock, tap_name_);
    if (!st.ok() && st.code() != Code::kNotFound) return std::move(st).WithContext(ctx);
  }
  tap_fd_.reset();
  active_ = false;
  kTapRedirectLog.Info("{}: done", ctx);
  return Status::Ok();
}

}  // namespace capsule::network
