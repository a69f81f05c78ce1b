// NETLINK_ROUTE socket, caches, and libnl/kernel error mapping.
#include "runtime/netlink/netlink_socket.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/netlink.h>

namespace capsule::netlink {
namespace {

Code CodeOf(int nl_error) {
  switch (nl_error) {
    case NLE_EXIST: return Code::kAlreadyExists;
    case NLE_INVAL: case NLE_RANGE: case NLE_AF_MISMATCH: return Code::kInvalidArgument;
    case NLE_OBJ_NOTFOUND: case NLE_NODEV: case NLE_NOADDR: return Code::kNotFound;
    case NLE_OPNOTSUPP: case NLE_AF_NOSUPPORT: return Code::kUnimplemented;
    case NLE_PERM: case NLE_NOACCESS: return Code::kPermissionDenied;
    case NLE_BUSY: case NLE_AGAIN: return Code::kUnavailable;
    default: return Code::kInternal;
  }
}

}  // namespace

Result<std::unique_ptr<NetlinkSocket>> NetlinkSocket::Open() {
  std::unique_ptr<NetlinkSocket> s(new NetlinkSocket());
  s->sock_.reset(nl_socket_alloc());
  if (!s->sock_) return Internal("nl_socket_alloc: out of memory");
  RETURN_IF_ERROR(s->Check(nl_connect(s->sock_.get(), NETLINK_ROUTE), "connect a NETLINK_ROUTE socket"));
  RETURN_IF_ERROR(s->Check(nl_socket_modify_err_cb(s->sock_.get(), NL_CB_CUSTOM, &NetlinkSocket::OnError, s.get()),
                           "install the netlink error callback"));
  return s;
}

int NetlinkSocket::OnError(sockaddr_nl*, nlmsgerr* err, void* self) {
  static_cast<NetlinkSocket*>(self)->last_errno_ = -err->error;
  return NL_STOP;  // libnl then returns its own code for err->error
}

Status NetlinkSocket::Check(int rc, const std::string& what) const {
  if (rc >= 0) return Status::Ok();
  if (last_errno_ > 0) return ErrnoStatus(what, last_errno_);
  return Status(CodeOf(-rc), fmt::format("{}: {}", what, nl_geterror(rc)));
}

Result<NlCachePtr> NetlinkSocket::Links() {
  nl_cache* c = nullptr;
  ResetError();
  RETURN_IF_ERROR(Check(rtnl_link_alloc_cache(get(), AF_UNSPEC, &c), "list links"));
  return NlCachePtr(c);
}

Result<LinkPtr> NetlinkSocket::Link(int ifindex) {
  rtnl_link* l = nullptr;
  ResetError();
  RETURN_IF_ERROR(Check(rtnl_link_get_kernel(get(), ifindex, nullptr, &l), fmt::format("get link {}", ifindex)));
  return LinkPtr(l);
}

Result<NlCachePtr> NetlinkSocket::Addresses() {
  nl_cache* c = nullptr;
  ResetError();
  RETURN_IF_ERROR(Check(rtnl_addr_alloc_cache(get(), &c), "list addresses"));
  return NlCachePtr(c);
}

Result<NlCachePtr> NetlinkSocket::Routes() {
  nl_cache* c = nullptr;
  ResetError();
  RETURN_IF_ERROR(Check(rtnl_route_alloc_cache(get(), AF_UNSPEC, 0, &c), "list routes"));
  return NlCachePtr(c);
}

std::string AddrToString(nl_addr* addr) {
  if (addr == nullptr || nl_addr_get_len(addr) == 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  const int family = nl_addr_get_family(addr);
  if ((family != AF_INET && family != AF_INET6) ||
      ::inet_ntop(family, nl_addr_get_binary_addr(addr), buf, sizeof buf) == nullptr)
    return "";
  return buf;
}

std::string MacToString(nl_addr* addr) {
  if (addr == nullptr || nl_addr_get_len(addr) != 6) return "";
  const auto* b = static_cast<const unsigned char*>(nl_addr_get_binary_addr(addr));
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5]);
}

Result<NlAddrPtr> ParseAddr(const std::string& text, int family) {
  nl_addr* a = nullptr;
  const std::string in = text.empty() ? (family == AF_INET6 ? "::/0" : "0.0.0.0/0") : text;
  int rc = nl_addr_parse(in.c_str(), family, &a);
  if (rc < 0) return InvalidArgument(fmt::format("\"{}\": {}", text, nl_geterror(rc)));
  return NlAddrPtr(a);
}

}  // namespace capsule::netlink
