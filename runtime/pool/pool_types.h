// What the pool's API speaks in, without gRPC: who claims, what a claim
// hands over, and the pool's status. pool_convert.h maps these to and from
// proto/capsule/pool/v1/pool.proto.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/host/daemon.h"
#include "runtime/pool/shape.h"

namespace capsule::pool {

struct Claimant {
  std::string ns;
  std::string sandbox_id;
  std::string pod;  // "namespace/name" when known, for logs
  ProcessIdentity process;
};

struct Claimed {
  std::string vm_id;
  std::string state_dir;
  std::string shape_key;
  int64_t idle_ms = 0;
  double claim_ms = 0;
  // The pool holds the VM's agent stream for the claimant
  // (agent_stream_handover.h); false: dial the agent.
  bool agent_stream = false;
};

struct ShapeStatus {
  std::string key;
  Shape shape;
  uint32_t target = 0, ready = 0, booting = 0, claimed = 0, boots = 0, boot_failures = 0;
  std::string last_failure;
  double boot_p50_ms = 0, boot_last_ms = 0;
  uint64_t idle_vm_rss_bytes = 0;
  // guest.device_set ("virtio-fs" or "dense"); the template's RAM shared by
  // every clone (a dense template's sealed copy, 0 otherwise); the mean
  // own memory of one ready VM's QEMU (process_usage.h: its anonymous pages
  // no other process maps, so not the template pages it only reads).
  std::string device_set;
  uint64_t template_shared_bytes = 0;
  uint64_t idle_vm_own_bytes = 0;
  uint64_t backoff_ms = 0;
  // Refills that wait pool.refill_holdback_ms after a claim, so they do
  // not compete with the pod that starts.
  uint32_t refills_held_back = 0;
  // How the next VM is made: "template" (a clone) or "boot".
  std::string refill = "boot";
  std::string template_key;  // "" while the shape has no template
  int64_t template_created_unix_ms = 0;
  double template_build_ms = 0;
  bool template_building = false;
  uint32_t template_builds = 0, template_failures = 0;
  std::string template_last_failure;
  uint32_t clones = 0, clone_failures = 0;
  double clone_p50_ms = 0, clone_last_ms = 0;
};

struct PoolStatus {
  std::vector<ShapeStatus> shapes;
  uint32_t max_parallel_boots = 0;
  std::string state_dir;
  bool draining = false;
  std::string accelerator;  // what the pool's VMs run under
  std::string ksm;          // the host's /sys/kernel/mm/ksm/run, "" if absent
};

}  // namespace capsule::pool
