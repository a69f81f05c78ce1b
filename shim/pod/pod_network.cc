// See pod_network.h.
#include "shim/pod/pod_network.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/network/netns_snapshot.h"
#include "shim/pod/host_namespaces.h"

namespace capsule::shim::pod {
namespace {

const log::Logger kPodNetworkLog("shim.net");
namespace v1 = agentclient::v1;

using Clock = std::chrono::steady_clock;

bool EqualsIgnoringCase(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

v1::IPAddress::Family FamilyOf(int family) { return family == AF_INET6 ? v1::IPAddress::V6 : v1::IPAddress::V4; }

v1::Interface GuestInterface(const network::PodInterface& i) {
  v1::Interface out;
  out.set_name(i.name);
  out.set_device_hint(i.mac);
  out.set_mtu(i.mtu);
  out.set_up(true);
  for (const auto& a : i.addresses) {
    v1::IPAddress* ga = out.add_addresses();
    ga->set_family(FamilyOf(a.family));
    ga->set_address(a.address);
    ga->set_prefix_len(static_cast<uint32_t>(a.prefix_len));
  }
  return out;
}

// ReadNetns leaves out the kernel's own prefix routes: the guest kernel
// makes them again when the agent assigns the addresses.
v1::Routes GuestRoutes(const network::NetnsSnapshot& snap) {
  v1::Routes out;
  for (const auto& r : snap.routes) {
    v1::Route* g = out.add_routes();
    g->set_dest(r.destination);
    g->set_gateway(r.gateway);
    g->set_device(r.device);
    g->set_source(r.source);
    g->set_scope(static_cast<uint32_t>(r.scope));
    g->set_family(FamilyOf(r.family));
  }
  return out;
}

// The boot NIC's tap, once in the pod's netns.
std::string BootTapName() { return fmt::format("{}0", network::kTapPrefix); }

}  // namespace

std::string PodNetnsPath(const nlohmann::json& spec) {
  const auto linux = spec.find("linux");
  if (linux == spec.end() || !linux->is_object()) return "";
  const auto namespaces = linux->find("namespaces");
  if (namespaces == linux->end() || !namespaces->is_array()) return "";
  for (const auto& ns : *namespaces) {
    if (ns.is_object() && ns.value("type", "") == "network") return ns.value("path", "");
  }
  return "";
}

Status PodNetwork::CheckBootNic(const network::PodInterface& iface, const vm::BootNic& nic) const {
  return network::TapRedirect::CheckAdoptable(nic.vmm_netns, nic.tap_name, netns_path_, iface.name,
                                              BootTapName());
}

Status PodNetwork::FinishBootNic() {
  if (!boot_nic_) return Status::Ok();
  const vm::BootNic nic = *std::exchange(boot_nic_, std::nullopt);
  const network::PodInterface& iface = snap_.interfaces[0];
  const std::string what = fmt::format("{} ({}, {}) on the boot NIC {}", iface.name, iface.mac, netns_path_, nic.mac);
  const auto t0 = Clock::now();
  auto moved = network::TapRedirect::AdoptTap(nic.vmm_netns, nic.tap_name, netns_path_, iface.name,
                                              BootTapName());
  if (!moved.ok()) return std::move(moved).status().WithContext("pod NIC " + what);
  taps_.push_back(std::move(moved).value());
  kPodNetworkLog.Info("pod NIC {}: taken over; tap moved and mirrored in {:.1f} ms", what, MsSince(t0));
  return Status::Ok();
}

Status PodNetwork::Hotplug(size_t n, const network::PodInterface& iface, hypervisor::Vmm& vmm) {
  const std::string nic = fmt::format("{} ({}, {})", iface.name, iface.mac, netns_path_);
  const auto t0 = Clock::now();
  auto made = network::TapRedirect::Create(netns_path_, iface.name, fmt::format("{}{}", network::kTapPrefix, n));
  if (!made.ok()) return std::move(made).status().WithContext("mirror " + nic);
  network::TapRedirect tap = std::move(made).value();
  hypervisor::NetDevice dev;
  dev.id = fmt::format("net{}", n);
  dev.tap_name = tap.tap_name();
  dev.mac = iface.mac;
  dev.fd_name = dev.id + "-tap";
  // Checked before the fd goes over: QEMU would keep a passed fd (and with
  // it the tap and the netns) when the hot-plug is refused up front.
  RETURN_IF_ERROR_CTX(hypervisor::ValidateDevice(dev), "the NIC for " + nic);
  RETURN_IF_ERROR_CTX(vmm.PassFd(dev.fd_name, tap.tap_fd()), "hand the tap of " + nic + " to the VMM");
  RETURN_IF_ERROR_CTX(vmm.HotplugDevice(dev), "hot-plug the NIC for " + nic);
  taps_.push_back(std::move(tap));
  kPodNetworkLog.Info("pod NIC {}: hot-plugged; tap made and plugged in {:.1f} ms", nic, MsSince(t0));
  return Status::Ok();
}

Result<std::unique_ptr<PodNetwork>> PodNetwork::Attach(const std::string& netns_path, hypervisor::Vmm& vmm,
                                                       const std::optional<vm::BootNic>& boot_nic) {
  const std::string what = "pod network " + netns_path;
  RETURN_IF_ERROR(RefuseHostNetns(netns_path));
  auto read = network::ReadNetns(netns_path);
  if (!read.ok()) return std::move(read).status().WithContext(what);
  std::unique_ptr<PodNetwork> net(new PodNetwork(netns_path));
  net->snap_ = std::move(read).value();
  for (size_t n = 0; n < net->snap_.interfaces.size(); ++n) {
    const network::PodInterface& iface = net->snap_.interfaces[n];
    if (n == 0 && boot_nic) {
      Status st = net->CheckBootNic(iface, *boot_nic);
      if (st.ok()) {
        net->boot_nic_ = boot_nic;
        net->used_boot_nic_ = true;
        net->boot_nic_mac_ = boot_nic->mac;
        continue;
      }
      kPodNetworkLog.Warn("{}: the boot NIC is not usable, hot-plugging one: {}", what, st.ToString());
    }
    RETURN_IF_ERROR(net->Hotplug(n, iface, vmm));
  }
  return net;
}

void PodNetwork::AddToSetup(v1::SetupSandboxRequest& req) const {
  for (size_t n = 0; n < snap_.interfaces.size(); ++n) {
    v1::Interface* iface = req.add_interfaces();
    *iface = GuestInterface(snap_.interfaces[n]);
    if (n == 0 && used_boot_nic_) {
      // The guest finds the NIC by the MAC it booted with and gives it the veth's.
      iface->set_device_hint(boot_nic_mac_);
      iface->set_hw_addr(snap_.interfaces[n].mac);
    }
  }
  if (!snap_.interfaces.empty()) *req.mutable_routes() = GuestRoutes(snap_);
}

Status PodNetwork::CheckGuest(const v1::SetupSandboxResponse& resp) const {
  if (static_cast<size_t>(resp.interfaces_size()) != snap_.interfaces.size())
    return Internal(fmt::format("{}: the agent answered for {} NIC(s), the pod has {}", netns_path_,
                                resp.interfaces_size(), snap_.interfaces.size()));
  for (size_t n = 0; n < snap_.interfaces.size(); ++n) {
    const v1::Interface& got = resp.interfaces(static_cast<int>(n));
    const network::PodInterface& want = snap_.interfaces[n];
    if (n == 0 && used_boot_nic_ && !EqualsIgnoringCase(got.hw_addr(), want.mac))
      return Internal(fmt::format("pod NIC {} ({}, {}) on the boot NIC {}: the agent left the NIC's MAC at {}",
                                  want.name, want.mac, netns_path_, boot_nic_mac_, got.hw_addr().substr(0, 64)));
    kPodNetworkLog.Info("pod NIC {} ({}): {} in the guest, {} address(es), mtu {}", want.name, want.mac,
                        got.name().substr(0, 64), got.addresses_size(), got.mtu());
  }
  return Status::Ok();
}

Status PodNetwork::Remove() {
  Status first;
  for (auto& tap : taps_) {
    Status st = tap.Remove();
    if (!st.ok() && first.ok()) first = std::move(st);
  }
  taps_.clear();
  return first;
}

PodNetwork::~PodNetwork() {
  if (Status st = Remove(); !st.ok()) kPodNetworkLog.Warn("{}: {}", netns_path_, st.ToString());
}

}  // namespace capsule::shim::pod
