// The OCI spec a container gets in the guest, made from the host's
// config.json: root.path becomes the rootfs under the VM's share, host bind
// mounts (CRI's /etc/hosts, resolv.conf, hostname, termination log,
// secrets, configmaps) become binds from the share, and what cannot cross
// into a VM is dropped or translated with a reason (namespace paths of host
// processes, the host network namespace, host hooks, the sandbox's host
// /dev/shm, device nodes and sockets). Pure: only reads the host's files'
// types, mounts nothing.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/status.h"

namespace capsule::shim::task {

inline constexpr std::string_view kDevShm = "/dev/shm";

// A host path to bind under the share before the container is created.
struct ShareBind {
  std::string host_source;
  std::string rel;         // under the share: "<container id>/mounts/<n>-<name>"
  bool directory = true;   // else a file bind (the target is created as a file)
  std::vector<std::string> options;  // bind options from the spec ("ro", "rbind", ...)
};

struct GuestSpecInput {
  std::string container_id;
  // The share-relative path of the container's rootfs ("<id>/rootfs").
  std::string rootfs_rel;
  // Share-relative path -> the path the guest sees.
  std::function<std::string(std::string_view rel)> guest_path;
};

struct GuestSpec {
  nlohmann::json spec;
  std::vector<ShareBind> binds;
  // One line per dropped or translated item, naming it and why (logged).
  std::vector<std::string> notes;
};

// INVALID_ARGUMENT naming the field for a spec that is not an object, has
// no root, or a bind mount whose source does not exist.
Result<GuestSpec> MakeGuestSpec(const nlohmann::json& host_spec, const GuestSpecInput& input);

}  // namespace capsule::shim::task
