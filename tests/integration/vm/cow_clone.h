// A copy-on-write clone of a serial-vsock template, launched by hand: the
// template's RAM file mapped private (share=off), the serial vsock port that
// came with the state joined to a capsule-vsockd of the clone's own, a fresh
// agent token, and no virtio-fs (vhost-user cannot see private RAM). What
// the dense device set's restore will do once it has a rootfs that is not
// virtio-fs; the template and bench tests both use it. QEMU 7.2 opens a
// share=off file read-write, so the caller's config runs QEMU as root.
#pragma once

#include <chrono>
#include <string>

#include "runtime/agentclient/agent_client.h"
#include "runtime/config/config.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/vm/vm_template.h"
#include "runtime/vsock/vsock_backend.h"

namespace capsule::vm::testing {

struct CowClone {
  hypervisor::VmPtr vm;
  vsock::VmVsockPtr port;
  agentclient::AgentClientPtr agent;
  std::string dir;
  double to_agent_ms = 0;  // QEMU launched -> state loaded -> resumed -> Check answered
  CowClone() = default;
  CowClone(CowClone&&) = default;
  CowClone& operator=(CowClone&&) = default;
  ~CowClone() { (void)Stop(); }  // a failed assertion still leaves nothing
  // Stops QEMU and the daemon and removes the dir. Idempotent.
  Status Stop();
};

// `tpl` must be built with vsock.backend serial; the clone's dir is
// <state_dir>/vm/<id>.
Result<CowClone> LaunchCowClone(const config::Config& config, const VmTemplate& tpl, const std::string& state_dir,
                                const std::string& id);

}  // namespace capsule::vm::testing
