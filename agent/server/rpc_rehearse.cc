// Rehearse: a pool VM runs, before any claim, the guest code a pod's start
// will run, so the pod does not pay for running it first. Under TCG that
// first run is the cost (a clone's QEMU starts with no translated code:
// measured 17 ms for the boot NIC's MAC, 27 ms for its address and link up,
// 9 ms for the routes, 10-13 ms for the clock and the RNG's reseed at
// claim); under KVM it is the first touch of the template's pages. The
// container part is the engine's (engine/rehearsal.h); the NIC part takes
// the boot NIC through the claim's own steps, then puts it back as it was,
// but up and without IPv6: the claim finds it by its MAC. The clock and the
// reseed are the host's own, carried in the request, applied as the claim
// applies them.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "agent/server/agent_service.h"
#include "agent/server/convert.h"
#include "agent/server/convert_net.h"
#include "agent/server/rpc_util.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

const log::Logger kRpcRehearseLog("rehearse");

// Locally administered, and from the benchmarking range (RFC 2544): no pod
// has them, and the NIC's tap is in QEMU's own netns meanwhile.
constexpr char kRehearsalMac[] = "02:ca:95:00:00:01";
constexpr char kRehearsalAddress[] = "198.18.0.2";
constexpr uint32_t kRehearsalPrefix = 30;
constexpr char kRehearsalGateway[] = "198.18.0.1";

Result<net::Interface> FindBy(net::Network& n, const std::string& what, bool by_name, const std::string& key) {
  ASSIGN_OR_RETURN(std::vector<net::Interface> links, n.ListInterfaces());
  auto it = std::find_if(links.begin(), links.end(),
                         [&](const net::Interface& i) { return (by_name ? i.name : i.hw_addr) == key; });
  if (it == links.end()) return NotFound(fmt::format("{}: no interface {} {}", what, by_name ? "named" : "with MAC", key));
  return *it;
}

}  // namespace

Status AgentService::RehearseNic(const std::string& mac) const {
  if (network_ == nullptr) return Unimplemented("this agent has no network");
  std::string lower = mac;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  ASSIGN_OR_RETURN(const net::Interface before, FindBy(*network_, "boot NIC", false, lower));
  ASSIGN_OR_RETURN(const std::vector<net::Route> routes_before, network_->ListRoutes());

  net::Interface pod = before;
  pod.hw_addr = kRehearsalMac;
  pod.mtu = 0;
  pod.addresses = {net::IpAddress{AF_INET, kRehearsalAddress, kRehearsalPrefix}};
  pod.up = true;
  net::Route via;
  via.gateway = kRehearsalGateway;
  via.device = before.name;
  v1::Interface pod_proto = InterfaceToProto(pod);  // as the claim sends it: found by MAC, given another
  pod_proto.set_device_hint(before.hw_addr);
  auto applied = ApplyInterface(pod_proto);
  Status played = applied.status();
  if (played.ok()) played = ApplyRoutes(RoutesToProto({via})).status();
  // Before any claim, so a console line costs no pod anything: the MAC is
  // the one the kernel reported after the change.
  if (played.ok())
    kRpcRehearseLog.Info("boot NIC {}: a pod's take-over played, MAC set to {}, a route via {}", before.name,
                         applied->hw_addr(), kRehearsalGateway);

  // Back as it was whatever failed, from where it is now (found by name:
  // its MAC may be either): the link first, since routes need its
  // addresses (and a MAC change may take it down, dropping routes through
  // it), then the routes where they differ. Except that it stays up, with
  // IPv6 off: the claim then changes its MAC live, keeping its filled
  // receive ring and its routes, and turns IPv6 on, which derives its
  // link-local address from the pod's MAC (not the template's, which every
  // clone has).
  net::Interface idle = before;
  idle.up = true;
  Status back;
  if (auto now = FindBy(*network_, "boot NIC", true, before.name); now.ok()) {
    v1::Interface restore = InterfaceToProto(idle);
    restore.set_device_hint(now->hw_addr);
    back = ApplyInterface(restore).status();
  } else {
    back = now.status();
  }
  if (back.ok()) back = network_->SetIpv6(before.name, false);
  if (back.ok()) {
    auto routes_now = network_->ListRoutes();
    if (!routes_now.ok()) {
      back = routes_now.status();
    } else if (*routes_now != routes_before) {
      back = ApplyRoutes(RoutesToProto(routes_before)).status();
    }
  }
  // What the claim needs: the NIC found again by its MAC. The rest is
  // compared and only reported.
  if (back.ok()) {
    auto again = FindBy(*network_, "boot NIC", false, before.hw_addr);
    if (!again.ok()) {
      back = again.status();
    } else if (again->addresses != idle.addresses || again->up != idle.up || again->mtu != idle.mtu) {
      kRpcRehearseLog.Warn("boot NIC {}: not quite as it was after the rehearsal ({} addresses, {}, mtu {})",
                           before.name, again->addresses.size(), again->up ? "up" : "down", again->mtu);
    }
  }
  RETURN_IF_ERROR_CTX(played, "playing a pod's take-over");
  RETURN_IF_ERROR_CTX(back, fmt::format("putting {} back as it was (MAC {})", before.name, before.hw_addr));
  return Status::Ok();
}

grpc::Status AgentService::Rehearse(Ctx*, const v1::RehearseRequest* req, v1::RehearseResponse* resp) {
  return Guarded("Rehearse", [&]() -> Status {
    const auto start = std::chrono::steady_clock::now();
    if (req->has_time()) RETURN_IF_ERROR_CTX(ApplyGuestTime(req->time()), "Rehearse: time");
    if (req->has_randomness()) {
      auto rng = ApplyRandomness(req->randomness());
      if (!rng.ok()) return std::move(rng).status().WithContext("Rehearse: randomness");
    }
    const std::vector<std::string> drivers(req->storage_drivers().begin(), req->storage_drivers().end());
    auto ms = pods_->Rehearse(drivers);
    if (!ms.ok()) return std::move(ms).status().WithContext("Rehearse");
    kRpcRehearseLog.Info("rehearsed a container's create, start and removal in {:.1f} ms", *ms);
    if (!req->boot_nic_mac().empty()) RETURN_IF_ERROR_CTX(RehearseNic(req->boot_nic_mac()), "Rehearse: the boot NIC");
    std::vector<storage::StorageSpec> ahead;
    for (const auto& s : req->storages()) ahead.push_back(StorageFromProto(s));
    RETURN_IF_ERROR_CTX(pods_->MountAhead(ahead), "Rehearse");
    resp->set_elapsed_ms(static_cast<uint32_t>(MsSince(start)));
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
