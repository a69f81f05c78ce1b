// The tc pieces of the redirect, over libnl-route-3 in the caller's netns:
// an ingress qdisc, and on it a u32 filter matching every frame whose
// mirred action redirects it to another interface's egress. (The `matchall`
// classifier would be the natural choice but is not in every host kernel;
// u32 with an all-zero key is what Kata's tcfilter model uses too.)
#pragma once

#include <netlink/route/classifier.h>
#include <netlink/route/qdisc.h>

#include <memory>

#include "runtime/common/status.h"
#include "runtime/netlink/netlink_socket.h"

namespace capsule::network {

using QdiscPtr = std::unique_ptr<rtnl_qdisc, netlink::NlDeleter<rtnl_qdisc, rtnl_qdisc_put>>;
using ClsPtr = std::unique_ptr<rtnl_cls, netlink::NlDeleter<rtnl_cls, rtnl_cls_put>>;

// tc handle of the ingress qdisc ("ffff:"), parent of its filters; from
// linux/pkt_sched.h's TC_H_INGRESS convention used by iproute2.
inline constexpr uint32_t kIngressHandle = 0xffff0000U;
// Priority of our filter (tc "pref"); the only filter on the qdisc.
inline constexpr uint16_t kRedirectFilterPrio = 1;

// ALREADY_EXISTS if the interface has an ingress qdisc already.
Status AddIngressQdisc(netlink::NetlinkSocket& sock, int ifindex);
// Also removes every filter on it. NOT_FOUND if there is none.
Status DeleteIngressQdisc(netlink::NetlinkSocket& sock, int ifindex);
// u32 match-all on `from`'s ingress, action mirred egress redirect to `to`.
Status AddRedirectFilter(netlink::NetlinkSocket& sock, int from_ifindex, int to_ifindex);

}  // namespace capsule::network
