// PodNetwork: the pod's network inside its VM, in Kata's "tcfilter" model.
// CNI has put a veth (eth0) with the pod IP into the pod's netns; for each
// such interface a tap is made beside it with tc mirred redirect both ways
// (runtime/network), its fd handed to the VMM and hot-plugged as a
// virtio-net NIC carrying the veth's MAC, and the agent then gives the
// guest's NIC the interface's name, MTU and addresses and installs the
// netns's routes, within the sandbox's one set-up call (SetupSandbox). Frames addressed to the veth's MAC thus reach the guest
// unchanged, and the pod IP CNI reported is the VM's.
//
// A VM booted before the pod existed (the warm pool) knows nothing of it,
// so per-pod identity arrives after boot, in one of two ways:
//   - the boot NIC (guest.boot_nic): QEMU opened a tap in its own netns at
//     boot and the guest probed the NIC then; the first interface moves that
//     tap into the pod's netns and the agent gives the NIC the veth's MAC.
//     A few netlink calls on either side, no PCI work in the guest.
//   - hot-plug: a new tap in the pod's netns, its fd passed to QEMU and a
//     virtio-net NIC added on a free root port; the guest then does PCI
//     hot-plug and a driver probe (about 250 ms under TCG). Every further
//     interface, and the first when the boot NIC cannot be taken over.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/network/netns_snapshot.h"
#include "runtime/network/tap_redirect.h"
#include "runtime/vm/sandbox_vm.h"

namespace capsule::shim::pod {

// The pod's network namespace: the path of the sandbox container's
// linux.namespaces entry of type "network"; "" when it has none (host
// network) or one without a path (a fresh, empty netns: `ctr run`).
std::string PodNetnsPath(const nlohmann::json& spec);

class PodNetwork {
 public:
  // The host's half: mirrors every interface of `netns_path` (except lo)
  // into the VM; the guest's half is what AddToSetup puts in the sandbox's
  // set-up call. On failure what was set up on the host is undone; a NIC
  // already plugged goes with the VM.
  // `boot_nic`: the VM's NIC plugged at boot, for the first interface. Its
  // tap is only checked here; FinishBootNic moves and mirrors it, which
  // needs nothing from the guest and so runs beside the set-up call.
  static Result<std::unique_ptr<PodNetwork>> Attach(const std::string& netns_path, hypervisor::Vmm& vmm,
                                                    const std::optional<vm::BootNic>& boot_nic);
  // Takes the boot NIC's tap over (a no-op without one); the pod's network
  // works once it returned OK. Once, after Attach; not beside nic_count().
  Status FinishBootNic();
  // The guest's NICs (names, MACs, MTU, addresses) and the netns's routes.
  void AddToSetup(agentclient::v1::SetupSandboxRequest& req) const;
  // What the guest says it did: a NIC for every interface, and the boot NIC
  // carrying the veth's MAC (frames for that MAC only reach a NIC with it).
  Status CheckGuest(const agentclient::v1::SetupSandboxResponse& resp) const;
  // Removes the taps and filters (Remove()).
  ~PodNetwork();
  PodNetwork(const PodNetwork&) = delete;
  PodNetwork& operator=(const PodNetwork&) = delete;

  size_t nic_count() const { return taps_.size(); }
  // Whether the first interface took over the boot NIC.
  bool used_boot_nic() const { return used_boot_nic_; }
  // Call once the VMM is stopping or stopped (a tap it still holds is
  // detached from it). The netns may already be gone (CNI deleted it): not
  // an error. Idempotent.
  Status Remove();

 private:
  explicit PodNetwork(std::string netns_path) : netns_path_(std::move(netns_path)) {}

  // Whether `iface` can go on the boot NIC; the error says why not.
  Status CheckBootNic(const network::PodInterface& iface, const vm::BootNic& nic) const;
  // Mirrors interface number `n` into the VM on a hot-plugged NIC.
  Status Hotplug(size_t n, const network::PodInterface& iface, hypervisor::Vmm& vmm);

  const std::string netns_path_;
  network::NetnsSnapshot snap_;
  std::vector<network::TapRedirect> taps_;
  std::string boot_nic_mac_;  // the boot NIC's MAC before the guest takes the veth's; "" without
  bool used_boot_nic_ = false;
  std::optional<vm::BootNic> boot_nic_;  // checked by Attach, taken over by FinishBootNic
};

}  // namespace capsule::shim::pod
