// RAII over libnl-route-3: owning pointers for sockets, caches, links,
// addresses and routes, and a socket that keeps the kernel's errno of the
// last failed request (libnl folds most of them into "Unspecific failure",
// which would make every route error read the same).
#pragma once

#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include <memory>
#include <string>

#include "runtime/common/status.h"

namespace capsule::netlink {

template <typename T, void (*Free)(T*)>
struct NlDeleter {
  void operator()(T* p) const {
    if (p != nullptr) Free(p);
  }
};
using NlCachePtr = std::unique_ptr<nl_cache, NlDeleter<nl_cache, nl_cache_free>>;
using NlAddrPtr = std::unique_ptr<nl_addr, NlDeleter<nl_addr, nl_addr_put>>;
using LinkPtr = std::unique_ptr<rtnl_link, NlDeleter<rtnl_link, rtnl_link_put>>;
using AddrPtr = std::unique_ptr<rtnl_addr, NlDeleter<rtnl_addr, rtnl_addr_put>>;
using RoutePtr = std::unique_ptr<rtnl_route, NlDeleter<rtnl_route, rtnl_route_put>>;

class NetlinkSocket {
 public:
  // A NETLINK_ROUTE socket in the caller's network namespace.
  static Result<std::unique_ptr<NetlinkSocket>> Open();
  NetlinkSocket(const NetlinkSocket&) = delete;
  NetlinkSocket& operator=(const NetlinkSocket&) = delete;

  nl_sock* get() const { return sock_.get(); }
  // Call before a request: forgets the errno of the previous one.
  void ResetError() { last_errno_ = 0; }
  // OK for rc >= 0; else a Status for `what` from the kernel's errno when
  // it sent one, else from libnl's code.
  Status Check(int rc, const std::string& what) const;
  // The kernel's errno of the last failed request since ResetError(), 0 if
  // none: for callers that treat one errno (ENODEV, ENOENT) as "already gone".
  int last_errno() const { return last_errno_; }

  Result<NlCachePtr> Links();
  // One link by its index (one request, not a dump); NOT_FOUND once gone.
  Result<LinkPtr> Link(int ifindex);
  Result<NlCachePtr> Addresses();
  Result<NlCachePtr> Routes();

 private:
  NetlinkSocket() = default;
  static int OnError(sockaddr_nl*, nlmsgerr* err, void* self);

  std::unique_ptr<nl_sock, NlDeleter<nl_sock, nl_socket_free>> sock_;
  int last_errno_ = 0;  // positive errno of the last NLMSG_ERROR, 0 if none
};

// "10.0.0.2" (no prefix) of an nl_addr; "" for an empty one.
std::string AddrToString(nl_addr* addr);
// "aa:bb:cc:dd:ee:ff" of a link-layer address; "" for none.
std::string MacToString(nl_addr* addr);
// Parses "10.0.0.2", "10.0.0.0/24" or "" (any, for the default route).
Result<NlAddrPtr> ParseAddr(const std::string& text, int family);

}  // namespace capsule::netlink
