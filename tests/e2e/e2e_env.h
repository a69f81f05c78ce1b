// What every end-to-end test of the shim needs around a real containerd
// and real QEMU: a capsule config.yaml pointing at the built guest kernel
// and initrd with a private state dir, containerd's PATH leading to the
// built containerd-shim-capsule-v2 (containerd 1.6's CRI ignores
// runtime_path), and a leak check run after each test: no shim, QEMU,
// virtiofsd or capsule-vsockd process of ours, no mount under the state
// dirs, no VM dir, no shim socket left.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"

namespace capsule::testing {

inline constexpr const char* kCapsuleRuntimeType = "io.containerd.capsule.v2";

class E2eEnv {
 public:
  // Writes <tmp>/capsule.yaml; fails when the guest kernel/initrd are not
  // built (`make deps` and the deploy targets). `boot_nic`: guest.boot_nic
  // (false: every pod NIC is hot-plugged).
  static Result<E2eEnv> Create(bool boot_nic = true);

  const std::string& dir() const { return tmp_->path(); }
  std::string config_path() const { return tmp_->Join("capsule.yaml"); }
  std::string state_dir() const { return tmp_->Join("state"); }
  // pool.socket of the config: no daemon answers there unless a test starts one.
  std::string pool_socket() const { return tmp_->Join("pool.sock"); }
  // runtime.image_cache_dir: the dense device set's rootfs images.
  std::string image_cache_dir() const { return tmp_->Join("images"); }
  // The fault tests' guest image: capsule-initrd.img with capsule-agent-faults
  // as /init (the agent with its fault switch, agent/faults).
  static std::string FaultInitrd();
  // Writes a config like config_path()'s to `path` (atomically), booting
  // FaultInitrd() with hypervisor.kernel_params `kernel_params` (e.g.
  // "capsule.fault=CreateContainer:hang") and runtime.agent_timeout_ms.
  // Each pod's shim reads its config when it starts, so a test can change
  // it between pods.
  Status WriteFaultConfig(const std::string& path, const std::string& kernel_params, uint32_t agent_timeout_ms) const;
  // The directory holding containerd-shim-capsule-v2, for containerd's PATH.
  static std::string ShimDir();
  static std::string PathWithShim();

  // Everything of ours still alive or mounted: processes whose command
  // line names `containerd_address` or our state dir, mounts under
  // `extra_dirs` or the state dir, VM dirs, and the shim sockets of the
  // given groups (ids: a pod's sandbox id, or a ctr container's id) in
  // namespace `ns`. (Other tests on this host make sockets there too, so
  // only ours are checked.)
  std::vector<std::string> Leaks(const std::string& containerd_address,
                                 const std::vector<std::string>& extra_dirs, const std::string& ns = "",
                                 const std::vector<std::string>& shim_groups = {}) const;
  // pid and command line (NULs as spaces) of every process naming a needle.
  static std::vector<std::pair<pid_t, std::string>> Processes(const std::vector<std::string>& needles);
  // Kills and unmounts what Leaks() finds (after a failed test).
  void Reap(const std::string& containerd_address, const std::vector<std::string>& extra_dirs) const;

 private:
  explicit E2eEnv(TempDir tmp) : tmp_(std::make_shared<TempDir>(std::move(tmp))) {}
  std::string ConfigYaml(bool boot_nic, const std::string& initrd, const std::string& kernel_params,
                         uint32_t agent_timeout_ms) const;
  std::shared_ptr<TempDir> tmp_;
};

}  // namespace capsule::testing
