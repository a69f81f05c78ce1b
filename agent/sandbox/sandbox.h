// The pod's sandbox inside the guest: its identity (id, hostname, DNS), the
// storages mounted for it, and whether its containers share a pid namespace.
// One per VM. The container engine watches it through SandboxObserver: it
// learns the sandbox when it is ready and must stop every container before
// the storages under them are unmounted.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/modules/loader.h"
#include "agent/storage/storage.h"
#include "runtime/common/status.h"

namespace capsule::agent::sandbox {

struct SandboxSpec {
  std::string id;
  std::string hostname;                    // empty: keep the boot hostname
  std::vector<std::string> dns;            // resolv.conf lines, or bare server addresses
  std::vector<storage::StorageSpec> storages;  // mounted in order, unmounted in reverse
  bool sandbox_pidns = false;
  std::vector<std::string> kernel_modules;  // loaded before the storages are mounted
};

struct SandboxInfo {
  std::string id;
  std::string hostname;
  bool sandbox_pidns = false;
  std::vector<std::string> mount_points;
};

class SandboxObserver {
 public:
  virtual ~SandboxObserver() = default;
  // The sandbox is set up; an error undoes it and fails CreateSandbox.
  virtual Status SandboxCreated(const SandboxInfo& info) = 0;
  // Called before the storages go: stop and remove every container.
  virtual Status SandboxDestroying(const SandboxInfo& info) = 0;
};

// What the sandbox may touch; tests point it away from the host's files.
struct SandboxEnvironment {
  std::string resolv_conf_path = "/etc/resolv.conf";
  bool apply_hostname = true;                  // sethostname(2) in our UTS namespace
  modules::ModuleLoader* modules = nullptr;    // not owned; null: kernel_modules unsupported
};

class SandboxManager {
 public:
  explicit SandboxManager(SandboxEnvironment env) : env_(std::move(env)) {}

  // Not owned; must outlive the manager. Set before the first Create.
  void SetObserver(SandboxObserver* observer);

  // ALREADY_EXISTS while a sandbox exists; INVALID_ARGUMENT naming the field
  // for bad input; on any failure nothing stays mounted.
  Status Create(const SandboxSpec& spec);
  // Tears the sandbox down; without one it is a no-op, so retries are safe.
  Status Destroy();
  std::optional<SandboxInfo> Current() const;

 private:
  struct Active {
    SandboxInfo info;
    std::vector<storage::MountedStorage> mounts;  // in mount order
  };
  Status Setup(const SandboxSpec& spec, Active& active);

  const SandboxEnvironment env_;
  mutable std::mutex mu_;               // serializes Create/Destroy
  SandboxObserver* observer_ = nullptr;  // guarded by mu_
  std::optional<Active> active_;        // guarded by mu_
};

// Validation of a whole spec, exposed for tests; field names follow the proto.
Status ValidateSandboxSpec(const SandboxSpec& spec);
// resolv.conf text from CreateSandbox's dns entries.
Result<std::string> ResolvConfFromDns(const std::vector<std::string>& dns);

}  // namespace capsule::agent::sandbox
