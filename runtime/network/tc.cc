// Ingress qdisc and mirred redirect filter, built as libnl objects and sent
// with NLM_F_EXCL so that nobody else's configuration is silently replaced.
#include "runtime/network/tc.h"

#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/tc_act/tc_mirred.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/cls/u32.h>

#include <fmt/format.h>

namespace capsule::network {
namespace {

using ActPtr = std::unique_ptr<rtnl_act, netlink::NlDeleter<rtnl_act, rtnl_act_put>>;

QdiscPtr IngressQdisc(int ifindex) {
  QdiscPtr q(rtnl_qdisc_alloc());
  if (!q) return q;
  rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
  rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_INGRESS);
  rtnl_tc_set_handle(TC_CAST(q.get()), kIngressHandle);
  if (rtnl_tc_set_kind(TC_CAST(q.get()), "ingress") < 0) q.reset();
  return q;
}

// mirred egress redirect to `to`; the frame is consumed (TC_ACT_STOLEN), as
// tc's "action mirred egress redirect" does.
Result<ActPtr> RedirectAction(int to_ifindex) {
  ActPtr act(rtnl_act_alloc());
  if (!act) return Internal("rtnl_act_alloc: out of memory");
  if (int rc = rtnl_tc_set_kind(TC_CAST(act.get()), "mirred"); rc < 0)
    return Internal(fmt::format("libnl has no mirred action: {}", nl_geterror(rc)));
  rtnl_mirred_set_action(act.get(), TCA_EGRESS_REDIR);
  rtnl_mirred_set_policy(act.get(), TC_ACT_STOLEN);
  rtnl_mirred_set_ifindex(act.get(), static_cast<uint32_t>(to_ifindex));
  return act;
}

}  // namespace

Status AddIngressQdisc(netlink::NetlinkSocket& sock, int ifindex) {
  QdiscPtr q = IngressQdisc(ifindex);
  if (!q) return Internal("allocate an ingress qdisc: out of memory");
  sock.ResetError();
  return sock.Check(rtnl_qdisc_add(sock.get(), q.get(), NLM_F_CREATE | NLM_F_EXCL), "add ingress qdisc");
}

Status DeleteIngressQdisc(netlink::NetlinkSocket& sock, int ifindex) {
  QdiscPtr q = IngressQdisc(ifindex);
  if (!q) return Internal("allocate an ingress qdisc: out of memory");
  sock.ResetError();
  return sock.Check(rtnl_qdisc_delete(sock.get(), q.get()), "delete ingress qdisc");
}

Status AddRedirectFilter(netlink::NetlinkSocket& sock, int from_ifindex, int to_ifindex) {
  ClsPtr cls(rtnl_cls_alloc());
  if (!cls) return Internal("rtnl_cls_alloc: out of memory");
  rtnl_tc_set_ifindex(TC_CAST(cls.get()), from_ifindex);
  rtnl_tc_set_parent(TC_CAST(cls.get()), kIngressHandle);
  if (int rc = rtnl_tc_set_kind(TC_CAST(cls.get()), "u32"); rc < 0)
    return Internal(fmt::format("libnl has no u32 classifier: {}", nl_geterror(rc)));
  rtnl_cls_set_prio(cls.get(), kRedirectFilterPrio);
  rtnl_cls_set_protocol(cls.get(), ETH_P_ALL);
  // "match u8 0 0": one key with an empty mask matches every frame.
  int rc = rtnl_u32_add_key_uint8(cls.get(), 0, 0, 0, 0);
  if (rc >= 0) rc = rtnl_u32_set_cls_terminal(cls.get());
  if (rc < 0) return Internal(fmt::format("build the u32 match-all selector: {}", nl_geterror(rc)));
  ASSIGN_OR_RETURN(ActPtr act, RedirectAction(to_ifindex));
  if (rc = rtnl_u32_add_action(cls.get(), act.get()); rc < 0)  // takes its own reference
    return Internal(fmt::format("attach the mirred action: {}", nl_geterror(rc)));
  sock.ResetError();
  return sock.Check(rtnl_cls_add(sock.get(), cls.get(), NLM_F_CREATE | NLM_F_EXCL),
                    fmt::format("add u32 filter with mirred redirect to ifindex {}", to_ifindex));
}

}  // namespace capsule::network
