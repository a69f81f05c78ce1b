// The `delete` hook. containerd runs `delete` whenever a task's connection
// to the shim closes, also for one container of a pod whose shim still
// serves the others; so the VM is only touched when nothing serves the
// group's socket any more.
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/mount_table.h"
#include "shim/launcher/bundle.h"
#include "shim/pod/sandbox.h"
#include "shim/service/daemon_hooks.h"
#include "shim/launcher/bundle_record.h"

namespace capsule::shim::service {
namespace {

const log::Logger kCleanupLog("shim.cleanup");

// Stops the VM a dead shim left; its pid, or 0 when none was left.
uint32_t StopLeftVm(const launcher::BundleRecord& record, const VmProviderFactory& make_vms) {
  LoadedConfig cfg = LoadConfig(record.config_path);
  if (!cfg.error.ok()) kCleanupLog.Warn("{}; adopting with the built-in defaults", cfg.error.ToString());
  pod::VmProviderPtr vms = make_vms(cfg.config);
  auto vm = vms->Adopt(record.vm_state_dir);
  if (!vm.ok()) {
    if (vm.status().code() != Code::kNotFound)
      kCleanupLog.Warn("adopt VM {} in {}: {}", record.vm_id, record.vm_state_dir, vm.status().ToString());
    return 0;
  }
  const auto pid = static_cast<uint32_t>((*vm)->vmm_pid());
  kCleanupLog.Warn("stopping VM {} (VMM pid {}) left by a dead shim", record.vm_id, pid);
  if (Status st = (*vm)->Stop(std::chrono::milliseconds(0)); !st.ok())
    kCleanupLog.Error("stop VM {}: {}", record.vm_id, st.ToString());
  return pid;
}

}  // namespace

Result<uint32_t> Cleanup(const launcher::CleanupContext& ctx, const VmProviderFactory& make_vms) {
  auto record = launcher::ReadBundleRecord(ctx.bundle);
  if (!record.ok()) {
    if (record.status().code() == Code::kNotFound) return 0u;  // the shim never got to create it
    return std::move(record).status();
  }
  if (launcher::GroupStillServed(ctx.bundle)) {
    kCleanupLog.Debug("task {}: the pod's shim still serves; it cleans up itself", ctx.id);
    return 0u;
  }
  uint32_t pid = StopLeftVm(*record, make_vms);
  // The VM's stop released its share; whatever is still mounted for this
  // container (a VM that was already gone) goes now.
  if (!record->container_share_dir.empty()) {
    if (Status st = UnmountTree(record->container_share_dir); !st.ok()) kCleanupLog.Error("{}", st.ToString());
    if (Status st = RemoveAll(record->container_share_dir); !st.ok()) kCleanupLog.Warn("{}", st.ToString());
  }
  return pid;
}

}  // namespace capsule::shim::service
