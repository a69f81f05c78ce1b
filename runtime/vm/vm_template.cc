// BuildTemplate: <root>/<key>.building/ (0700) -> the template VM in its
// vm/ subdir, RAM in ram (a shared file), vmgenid on, root ports reserved,
// only the boot NIC as a device -> wait for the agent's ready line on the
// serial console (there is no vsock device to ask it through: that is
// what keeps the VM migratable) -> SaveState into state -> stop the VMM ->
// template.json -> rename to <root>/<key>/.
//
// The console is guest output, but a template runs nothing but our own
// kernel and agent before it is saved, so its ready line is what it seems;
// every clone is still checked over vsock (Check) before it is ready.
#include "runtime/vm/vm_template.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "runtime/common/file_util.h"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/qemu_probe.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/vm/boot_steps.h"
#include "runtime/vm/ram_image.h"
#include "runtime/vm/vm_dir.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
const log::Logger kVmTemplateLog("vm");

constexpr const char* kRecordName = "template.json";
constexpr const char* kBuildingSuffix = ".building";
// How often the console is read for the agent's ready line.
constexpr milliseconds kReadyPoll{20};
// The console's tail read for the ready line (the agent prints it early).
constexpr size_t kConsoleScanBytes = 64 * 1024;
// A device-state stream is a few hundred KB: seconds would mean trouble.
constexpr milliseconds kSaveTimeout{30000};

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t AllocatedBytes(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

uint64_t FileBytes(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Until the console shows the agent's ready line; the VMM's exit or the
// deadline end the wait with the console's tail.
Status WaitForReadyLine(hypervisor::Vmm& vmm, const std::string& console, milliseconds budget) {
  const auto deadline = BootClock::now() + budget;
  for (;;) {
    if (ReadLogTail(console, kConsoleScanBytes).find(guest_abi::kAgentReadyMarker) != std::string::npos)
      return Status::Ok();
    pollfd p{vmm.exit_fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kReadyPoll.count())) > 0) {
      auto exit = vmm.WaitExit(milliseconds(3000));
      return Unavailable("the VMM exited while the template booted: " +
                         (exit ? exit->Describe(vmm.id()) : std::string("no exit report")));
    }
    if (BootClock::now() >= deadline)
      return DeadlineExceeded(fmt::format("no '{}' on the console within runtime.boot_timeout_ms {}:\n{}",
                                          guest_abi::kAgentReadyMarker, budget.count(), ReadLogTail(console, 3000)));
  }
}

// vsock.backend serial: the port is part of the template (it migrates), so
// the template VM boots with it, on a capsule-vsockd of its own that lives
// as long as `vsock`; each clone's QEMU joins its port to its own daemon.
Result<hypervisor::VmmPtr> LaunchTemplateVm(const config::Config& config, const BootPlan& plan,
                                           const std::string& ram_path, std::string* boot_nic_mac,
                                           vsock::VmVsockPtr* vsock) {
  // The template's token is never used (no one connects to a template), but
  // its fw_cfg file must be there for the clones' to take its place.
  ASSIGN_OR_RETURN(hypervisor::VmSpec s, BaseVmmSpec(config, plan, SandboxVmSpec{plan.id, plan.vcpus, plan.memory_mib, ""}));
  s.memory_file = ram_path;
  s.vmgenid = true;
  s.hotplug_slots = kTemplateHotplugSlots;
  if (config.guest.boot_nic) {
    ASSIGN_OR_RETURN(hypervisor::NetDevice nic, BootNicDevice());
    *boot_nic_mac = nic.mac;
    s.devices.push_back(std::move(nic));
  }
  if (VsockIsPartOfTheTemplate(config)) {
    ASSIGN_OR_RETURN(vsock::VsockBackendPtr backend, vsock::MakeVsockBackend(config.vsock.backend));
    ASSIGN_OR_RETURN(*vsock, backend->Prepare(vsock::VmVsockSpec{plan.state_dir, 0, kVsockDeviceId}));
    s.devices.push_back(VsockDeviceFor(**vsock));
  }
  return hypervisor::NewQemuHypervisor(config)->Launch(s);
}

Status SaveTo(hypervisor::Vmm& vmm, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return ErrnoStatus("create " + path);
  RETURN_IF_ERROR(vmm.SaveState(fd.get(), kSaveTimeout));
  if (::fsync(fd.get()) != 0) return ErrnoStatus("sync " + path);
  return Status::Ok();
}

Result<VmTemplate> BuildIn(const config::Config& config, const std::string& dir, const TemplateSpec& spec,
                           hypervisor::VmmPtr& vmm) {
  const auto start = BootClock::now();
  VmTemplate t;
  t.dir = dir;
  t.key = spec.key;
  t.hotplug_slots = kTemplateHotplugSlots;
  const std::string vm_dir = dir + "/vm";
  ASSIGN_OR_RETURN(BootPlan plan, Plan(config, SandboxVmSpec{"tpl-" + spec.key, spec.vcpus, spec.memory_mib, ""}, vm_dir));
  t.vcpus = plan.vcpus;
  t.memory_mib = plan.memory_mib;
  RETURN_IF_ERROR(CreateVmDir(vm_dir));
  vsock::VmVsockPtr vsock;  // serial only; stopped when the build ends either way
  ASSIGN_OR_RETURN(vmm, LaunchTemplateVm(config, plan, t.ram_path(), &t.boot_nic_mac, &vsock));
  RETURN_IF_ERROR(WaitForReadyLine(*vmm, hypervisor::VmPaths(vm_dir).console_log(),
                                   milliseconds(config.runtime.boot_timeout_ms)));
  const double booted_ms = MsSince(start);
  RETURN_IF_ERROR(SaveTo(*vmm, t.state_path()));
  RETURN_IF_ERROR(vmm->Stop(milliseconds(0)));
  vmm.reset();
  if (vsock) RETURN_IF_ERROR(vsock->Shutdown(milliseconds(2000)));
  // The template VM's uid owned the image while it ran; only we read it now.
  if (::chown(t.ram_path().c_str(), ::geteuid(), ::getegid()) != 0) return ErrnoStatus("chown " + t.ram_path());
  ASSIGN_OR_RETURN(uint64_t punched, PunchZeroPages(t.ram_path()));
  t.build_ms = MsSince(start);
  t.created_unix_ms = UnixMs();
  ASSIGN_OR_RETURN(auto caps, hypervisor::ProbeQemuCached(config.hypervisor.path,
                                                          config.runtime.state_dir + "/qemu-capabilities.json",
                                                          milliseconds(10000)));
  t.vmm_version = caps.version;
  t.ram_allocated_bytes = AllocatedBytes(t.ram_path());
  t.state_bytes = FileBytes(t.state_path());
  kVmTemplateLog.Info(
      "template {} ({} vCPU, {} MiB): booted in {:.0f} ms, saved in {:.0f} ms; RAM image {} MiB allocated "
      "({} MiB of zero pages left out), device state {} KiB",
      spec.key, t.vcpus, t.memory_mib, booted_ms, t.build_ms - booted_ms, t.ram_allocated_bytes >> 20, punched >> 20,
      t.state_bytes >> 10);
  return t;
}

}  // namespace

std::string TemplateDir(const std::string& root, const std::string& key) { return root + "/" + key; }

Result<VmTemplate> BuildTemplate(const config::Config& config, const std::string& root, const TemplateSpec& spec) {
  const std::string what = fmt::format("build template {}", spec.key);
  if (spec.key.empty() || spec.key.find_first_not_of("0123456789abcdef") != std::string::npos)
    return InvalidArgument(fmt::format("{}: a template key is lowercase hex", what));
  const std::string final_dir = TemplateDir(root, spec.key);
  const std::string dir = final_dir + kBuildingSuffix;
  RETURN_IF_ERROR_CTX(MkdirAll(root, 0700), what);
  RETURN_IF_ERROR_CTX(RemoveTemplate(config, dir), what + ": an unfinished earlier build");
  if (::mkdir(dir.c_str(), 0700) != 0) return ErrnoStatus(what + ": mkdir " + dir);
  kVmTemplateLog.Info("{}: booting a {} vCPU, {} MiB template VM in {}", what, spec.vcpus, spec.memory_mib, dir);

  hypervisor::VmmPtr vmm;
  auto built = BuildIn(config, dir, spec, vmm);
  Status st = built.status();
  if (st.ok()) st = WriteFileAtomic(dir + "/" + kRecordName, TemplateToJson(*built), 0600);
  if (st.ok()) st = RemoveTemplate(config, final_dir);
  if (st.ok() && ::rename(dir.c_str(), final_dir.c_str()) != 0) st = ErrnoStatus("rename " + dir + " to " + final_dir);
  if (!st.ok()) {
    if (vmm) (void)vmm->Stop(milliseconds(0));
    vmm.reset();
    if (Status rm = RemoveTemplate(config, dir); !rm.ok())
      kVmTemplateLog.Error("{}: clean-up: {}", what, rm.ToString());
    return std::move(st).WithContext(what);
  }
  built->dir = final_dir;
  (void)::rmdir((final_dir + "/vm").c_str());  // the template VM's dir, empty once it stopped
  if (config.guest.device_set == config::DeviceSet::kDense) RETURN_IF_ERROR_CTX(AttachSealedRam(*built), what);
  return built;
}

Result<VmTemplate> LoadTemplate(const std::string& dir) {
  const std::string path = dir + "/" + kRecordName;
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  ASSIGN_OR_RETURN(VmTemplate t, TemplateFromJson(*text, path));
  t.dir = dir;
  if (FileBytes(t.ram_path()) != static_cast<uint64_t>(t.memory_mib) << 20)
    return FailedPrecondition(fmt::format("{}: {} is not a {} MiB RAM image", path, t.ram_path(), t.memory_mib));
  if (FileBytes(t.state_path()) == 0) return FailedPrecondition(fmt::format("{}: {} is empty or missing", path, t.state_path()));
  return t;
}

Status AttachSealedRam(VmTemplate& t) {
  if (t.sealed_ram) return Status::Ok();
  const auto start = BootClock::now();
  ASSIGN_OR_RETURN(RamCopy ram, SealedRamImage(t.ram_path(), static_cast<uint64_t>(t.memory_mib) << 20,
                                               "capsule-template-" + t.key));
  kVmTemplateLog.Info("template {}: {} MiB of RAM sealed for copy-on-write clones in {:.0f} ms", t.key,
                      ram.copied >> 20, MsSince(start));
  t.sealed_ram = std::make_shared<const UniqueFd>(std::move(ram.memfd));
  return Status::Ok();
}

std::string TemplateToJson(const VmTemplate& t) {
  json j = {{"version", VmTemplate::kFormatVersion},
            {"key", t.key},
            {"vcpus", t.vcpus},
            {"memory_mib", t.memory_mib},
            {"hotplug_slots", t.hotplug_slots},
            {"boot_nic_mac", t.boot_nic_mac},
            {"created_unix_ms", t.created_unix_ms},
            {"build_ms", t.build_ms},
            {"vmm_version", t.vmm_version},
            {"ram_allocated_bytes", t.ram_allocated_bytes},
            {"state_bytes", t.state_bytes}};
  return j.dump(2) + "\n";
}

namespace {

Result<VmTemplate> ReadTemplateRecord(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseJson(text, "template record"));
  JsonField f(&j, "");
  RETURN_IF_ERROR(f.ExpectObject());
  VmTemplate t;
  int version = 0;
  RETURN_IF_ERROR(Required(f, "version", &version));
  if (version != VmTemplate::kFormatVersion)
    return f["version"].Error(fmt::format("format {} is not supported (this build reads {})", version, VmTemplate::kFormatVersion));
  RETURN_IF_ERROR(Required(f, "key", &t.key));
  if (t.key.empty() || t.key.size() > 64 || t.key.find_first_not_of("0123456789abcdef") != std::string::npos)
    return f["key"].Error("must be a lowercase hex key");
  for (auto [name, out, max] : {std::tuple<const char*, uint32_t*, int64_t>{"vcpus", &t.vcpus, hypervisor::kMaxVcpus},
                                {"memory_mib", &t.memory_mib, int64_t{1} << 24},
                                {"hotplug_slots", &t.hotplug_slots, hypervisor::kMaxHotplugSlots}}) {
    int64_t n = 0;
    RETURN_IF_ERROR(RequiredInRange(f, name, 1, max, &n));
    *out = static_cast<uint32_t>(n);
  }
  RETURN_IF_ERROR(Required(f, "boot_nic_mac", &t.boot_nic_mac));
  RETURN_IF_ERROR(RequiredInRange(f, "created_unix_ms", 0, std::numeric_limits<int64_t>::max(), &t.created_unix_ms));
  RETURN_IF_ERROR(Required(f, "build_ms", &t.build_ms));
  RETURN_IF_ERROR(Required(f, "vmm_version", &t.vmm_version));
  RETURN_IF_ERROR(Required(f, "ram_allocated_bytes", &t.ram_allocated_bytes));
  RETURN_IF_ERROR(Required(f, "state_bytes", &t.state_bytes));
  return t;
}

}  // namespace

Result<VmTemplate> TemplateFromJson(std::string_view text, std::string_view source) {
  auto t = ReadTemplateRecord(text);
  if (!t.ok()) return t.status().WithContext(source);
  return t;
}

Status RemoveTemplate(const config::Config& config, const std::string& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(dir + " is not a directory");
  const std::string vm_dir = dir + "/vm";
  if (PathExists(hypervisor::VmPaths(vm_dir).record())) {
    // A build a killed process left: its VMM may still run.
    auto vmm = hypervisor::NewQemuHypervisor(config)->Attach(vm_dir);
    if (vmm.ok()) {
      kVmTemplateLog.Warn("stopping the VMM of an unfinished template build in {}", dir);
      RETURN_IF_ERROR((*vmm)->Stop(milliseconds(0)));
    } else {
      kVmTemplateLog.Warn("unfinished template build in {}: {}", dir, vmm.status().message());
    }
  }
  return RemoveAll(dir);
}

}  // namespace capsule::vm
