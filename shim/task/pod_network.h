// PodNetwork: the pod's network inside its VM, in Kata's "tcfilter" model.
// CNI has put a veth (eth0) with the pod IP into the pod's netns; for each
// such interface a tap is made beside it with tc mirred redirect both ways
// (runtime/network), its fd handed to the VMM and hot-plugged as a
// virtio-net NIC carrying the veth's MAC, and the agent then gives the
// guest's NIC the interface's name, MTU and addresses and installs the
// netns's routes. Frames addressed to the veth's MAC thus reach the guest
// unchanged, and the pod IP CNI reported is the VM's.
//
// Hot-plug rather than boot-time NICs: a VM claimed from the warm pool is
// booted before the pod exists, so per-pod identity must arrive after boot.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/common/status.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/network/tap_redirect.h"
#include "shim/task/agent_handle.h"

namespace capsule::shim::task {

// The pod's network namespace: the path of the sandbox container's
// linux.namespaces entry of type "network"; "" when it has none (host
// network) or one without a path (a fresh, empty netns: `ctr run`).
std::string PodNetnsPath(const nlohmann::json& spec);

class PodNetwork {
 public:
  // Mirrors every interface of `netns_path` (except lo) into the VM. On
  // failure what was set up on the host is undone; a NIC already plugged
  // goes with the VM.
  static Result<std::unique_ptr<PodNetwork>> Attach(const std::string& netns_path, hypervisor::Vm& vmm,
                                                    const AgentHandle& agent);
  // Removes the taps and filters (Remove()).
  ~PodNetwork();
  PodNetwork(const PodNetwork&) = delete;
  PodNetwork& operator=(const PodNetwork&) = delete;

  size_t nic_count() const { return taps_.size(); }
  // Call after the VMM has stopped. The netns may already be gone (CNI
  // deleted it): not an error. Idempotent.
  Status Remove();

 private:
  explicit PodNetwork(std::string netns_path) : netns_path_(std::move(netns_path)) {}

  const std::string netns_path_;
  std::vector<network::TapRedirect> taps_;
};

}  // namespace capsule::shim::task
