// ListVms: reads each VM dir's vm.json (hypervisor VmRecord) and checks the
// recorded QEMU identity (pid + start time + boot id) against /proc.
#include "runtime/vm/vm_listing.h"

#include <dirent.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "runtime/host/daemon.h"
#include "runtime/host/process_usage.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"

namespace capsule::vm {
namespace {

VmListing Describe(const std::string& id, const std::string& dir) {
  VmListing l;
  l.id = id;
  l.state_dir = dir;
  hypervisor::VmPaths paths(dir);
  auto text = ReadFile(paths.record());
  if (!text.ok()) {
    l.problem = text.status().message();
    return l;
  }
  auto record = hypervisor::VmRecordFromJson(*text, paths.record());
  if (!record.ok()) {
    l.problem = record.status().message();
    return l;
  }
  l.vmm_pid = record->vmm.pid;
  l.vmm_running = OpenProcess(record->vmm).ok();
  l.accelerator = std::string(hypervisor::AcceleratorName(record->accelerator));
  l.vcpus = record->spec.vcpus;
  l.memory_mib = record->spec.memory_mib;
  if (l.vmm_running) {
    auto usage = ProcessUsage(l.vmm_pid);
    if (usage.ok()) {
      l.vmm_rss_bytes = usage->rss_bytes;
      l.vmm_cpu_seconds = usage->cpu_seconds;
    }
  }
  auto pod = ReadPodRecord(dir);
  if (pod.ok()) {
    l.pod = std::move(*pod);
  } else if (pod.status().code() != Code::kNotFound) {
    l.pod_problem = pod.status().message();
  }
  return l;
}

}  // namespace

Result<std::vector<VmListing>> ListVms(const config::Config& config) {
  std::string root = config.runtime.state_dir + "/vm";
  std::vector<VmListing> out;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return ErrnoStatus("opendir " + root);
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || e->d_type != DT_DIR) continue;
    out.push_back(Describe(name, root + "/" + name));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const VmListing& a, const VmListing& b) { return a.id < b.id; });
  return out;
}

}  // namespace capsule::vm
