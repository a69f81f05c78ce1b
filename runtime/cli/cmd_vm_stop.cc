// `capsule-runtime vm stop <id>...|--all`: adopts each VM from its state dir
// and stops it (agent power-off, then QEMU, virtiofsd, vsock host end,
// state dir). A VM whose QEMU already died is cleaned up all the same.
#include <fmt/format.h>

#include <cstdio>

#include "runtime/cli/command.h"
#include "runtime/common/file_util.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vm/vm_listing.h"

namespace capsule::cli {
namespace {

using std::chrono::milliseconds;

struct StopFlags {
  std::vector<std::string> ids;
  bool all = false;
  uint32_t graceful_ms = 5000;
};

Status StopOne(const config::Config& cfg, const std::string& id, milliseconds graceful) {
  std::string dir = vm::SandboxVm::StateDirFor(cfg, id);
  if (!PathExists(dir)) return NotFound(fmt::format("no VM '{}' ({} does not exist)", id, dir));
  auto v = vm::SandboxVm::Adopt(cfg, dir);
  if (!v.ok()) return v.status();
  return (*v)->Stop(graceful);
}

int RunStop(const GlobalFlags& flags, const StopFlags& sf) {
  auto cfg = LoadConfigFor(flags, "vm stop");
  if (!cfg.ok()) return 1;
  std::vector<std::string> ids = sf.ids;
  if (sf.all) {
    auto vms = vm::ListVms(*cfg);
    if (!vms.ok()) return Fail("vm stop", vms.status());
    for (const auto& l : *vms) ids.push_back(l.id);
  }
  if (ids.empty()) return Fail("vm stop", InvalidArgument("name a VM id, or --all"), 2);
  int rc = 0;
  for (const std::string& id : ids) {
    Status st = StopOne(*cfg, id, milliseconds(sf.graceful_ms));
    if (st.ok()) {
      std::printf("VM %s stopped\n", id.c_str());
    } else {
      rc = Fail("vm stop", st.WithContext("VM " + id));
    }
  }
  return rc;
}

}  // namespace

Command AddVmStopCommand(CLI::App& vm, const GlobalFlags& flags) {
  auto sf = std::make_shared<StopFlags>();
  Command c;
  c.app = vm.add_subcommand("stop", "stop VMs left running (adopt, power off, clean up)");
  c.app->add_option("ids", sf->ids, "VM ids");
  c.app->add_flag("--all", sf->all, "every VM in the state dir");
  c.app->add_option("--graceful-ms", sf->graceful_ms, "how long the guest may take to power off")
      ->capture_default_str();
  c.run = [&flags, sf] { return RunStop(flags, *sf); };
  return c;
}

}  // namespace capsule::cli
