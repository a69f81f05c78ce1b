// CheckHost: one function per part of the host, each appending items.
// Probes run the real things: the KVM timing guest (accel_probe), QEMU over
// QMP (qemu_probe) and `-device help`, virtiofsd --version.
#include "runtime/cli/host_check.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/erofs/erofs_image.h"
#include "runtime/host/run_capture.h"
#include "runtime/hypervisor/accel_probe.h"
#include "runtime/hypervisor/qemu_probe.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/vsock/vsockd_vsock.h"

namespace capsule::cli {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kProbeTimeout{15000};
constexpr const char* kVhostVsockDevice = "/dev/vhost-vsock";

void Add(HostReport& r, std::string name, Verdict v, std::string detail) {
  r.items.push_back(CheckItem{std::move(name), v, std::move(detail)});
}

void CheckAccelerator(const config::Config& config, HostReport& r) {
  hypervisor::KvmFacts facts = hypervisor::GatherKvmFacts();
  auto d = hypervisor::DecideAccelerator(config.hypervisor.accelerator, facts);
  if (!d.ok()) {
    Add(r, "accelerator", Verdict::kFail, d.status().message());
    return;
  }
  hypervisor::AccelDecision kvm = hypervisor::JudgeKvm(facts);
  std::string_view why = kvm.reason;
  constexpr std::string_view kUnusable = "KVM unusable: ";
  if (why.substr(0, kUnusable.size()) == kUnusable) why.remove_prefix(kUnusable.size());
  std::string detail;
  if (d->accelerator == hypervisor::Accelerator::kKvm) {
    detail = "KVM: " + kvm.reason;
  } else if (kvm.kvm_usable) {
    detail = fmt::format("TCG: hypervisor.accelerator is tcg (KVM would work: {})", kvm.reason);
  } else {
    detail = fmt::format("TCG: KVM unusable: {} -> TCG (software emulation, roughly 10-50x slower)", why);
  }
  Add(r, "accelerator", d->degraded ? Verdict::kWarn : Verdict::kOk, detail);
  if (d->accelerator == hypervisor::Accelerator::kTcg)
    r.warnings.push_back("VMs run under TCG (instruction emulation): boots take 10-20 s and guests run many times "
                         "slower than under KVM. Not for production.");
}

std::vector<std::string> MissingDevices(const std::string& help) {
  std::vector<std::string> missing;
  for (const char* dev : kRequiredQemuDevices) {
    if (help.find(fmt::format("name \"{}\"", dev)) == std::string::npos) missing.emplace_back(dev);
  }
  return missing;
}

void CheckQemu(const config::Config& config, HostReport& r) {
  const std::string& qemu = config.hypervisor.path;
  if (::access(qemu.c_str(), X_OK) != 0) {
    Add(r, "qemu", Verdict::kFail, fmt::format("hypervisor.path {}: {}", qemu, std::strerror(errno)));
    return;
  }
  auto caps = hypervisor::ProbeQemu(qemu, kProbeTimeout);
  if (!caps.ok()) {
    Add(r, "qemu", Verdict::kFail, fmt::format("{}: {}", qemu, caps.status().message()));
    return;
  }
  Add(r, "qemu", Verdict::kOk, fmt::format("{}, QEMU {} ({})", qemu, caps->version, caps->package));
  auto help = RunAndCapture({qemu, "-device", "help"}, kProbeTimeout);
  if (!help.ok()) {
    Add(r, "qemu devices", Verdict::kFail, help.status().message());
  } else if (auto missing = MissingDevices(help->output); !missing.empty()) {
    Add(r, "qemu devices", Verdict::kFail, fmt::format("missing: {}", fmt::join(missing, ", ")));
  } else {
    Add(r, "qemu devices", Verdict::kOk, fmt::format("{}", fmt::join(kRequiredQemuDevices, ", ")));
  }
  // Copy-on-write clones must not be able to change their template: QEMU
  // 8.2's memory-backend-file rom=off maps a read-only file private; before
  // it QEMU opens the file read-write, so the template goes to every clone
  // as a write-sealed memfd instead (ram_image.h), which works on both.
  auto backend_help = RunAndCapture({qemu, "-object", "memory-backend-file,help"}, kProbeTimeout);
  const bool rom = backend_help.ok() && backend_help->output.find("rom=") != std::string::npos;
  Add(r, "template RAM", Verdict::kOk,
      fmt::format("QEMU {} {} memory-backend-file rom=; dense clones map a write-sealed memfd copy of the "
                  "template private, which no VMM can change, on either", caps->version, rom ? "has" : "has no"));
  if (caps->sandbox) {
    Add(r, "qemu -sandbox", Verdict::kOk,
        config.hypervisor.seccomp_sandbox ? "supported, used (seccomp)" : "supported, off (hypervisor.seccomp_sandbox)");
  } else {
    Add(r, "qemu -sandbox", config.hypervisor.seccomp_sandbox ? Verdict::kWarn : Verdict::kOk,
        "not supported by this binary: QEMU runs without seccomp");
  }
}

void CheckVsock(const config::Config& config, HostReport& r) {
  UniqueFd dev(::open(kVhostVsockDevice, O_RDWR | O_CLOEXEC));
  int err = dev ? 0 : errno;
  auto kind = vsock::ResolveVsockBackendKind(config.vsock.backend, dev.valid());
  std::string why = dev ? fmt::format("{} opens", kVhostVsockDevice)
                        : fmt::format("{} cannot be opened ({})", kVhostVsockDevice, std::strerror(err));
  auto backend = vsock::MakeVsockBackend(config.vsock.backend);
  if (!backend.ok()) {
    Add(r, "vsock back end", Verdict::kFail, backend.status().message());
    return;
  }
  // What each back end asks of guest RAM and of templates (issue: dense clones).
  std::string_view gives = kind == config::VsockBackendKind::kSerial
                               ? "a virtio-serial port: private guest RAM possible, part of a template"
                           : kind == config::VsockBackendKind::kVhostUser
                               ? "vhost-user: guest RAM shared, hot-plugged into clones"
                               : "kernel vhost-vsock: private guest RAM possible, hot-plugged into clones";
  Add(r, "vsock back end", Verdict::kOk,
      fmt::format("{} (vsock.backend: {}; {}); {}", config::VsockBackendName(kind),
                  config::VsockBackendName(config.vsock.backend), why, gives));
  if (kind == config::VsockBackendKind::kVhost) return;
  auto path = vsock::VsockdVsock(vsock::VsockBackendOptions{}).VsockdPath();
  Add(r, "capsule-vsockd", path.ok() ? Verdict::kOk : Verdict::kFail, path.ok() ? *path : path.status().message());
}

void CheckFile(HostReport& r, const std::string& name, const std::string& key, const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || ::access(path.c_str(), R_OK) != 0) {
    Add(r, name, Verdict::kFail, fmt::format("{} {}: {}", key, path, std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    Add(r, name, Verdict::kFail, fmt::format("{} {}: not a regular file", key, path));
  } else {
    Add(r, name, Verdict::kOk, fmt::format("{} ({:.1f} MiB)", path, static_cast<double>(st.st_size) / (1 << 20)));
  }
}

void CheckVirtiofsd(const config::Config& config, HostReport& r) {
  const std::string& bin = config.virtiofs.daemon;
  if (::access(bin.c_str(), X_OK) != 0) {
    Add(r, "virtiofsd", Verdict::kFail, fmt::format("virtiofs.daemon {}: {}", bin, std::strerror(errno)));
    return;
  }
  auto out = RunAndCapture({bin, "--version"}, kProbeTimeout);
  if (!out.ok() || out->exit_code != 0) {
    std::string why = out.ok() ? fmt::format("exit code {}: {}", out->exit_code, out->output) : out.status().message();
    Add(r, "virtiofsd", Verdict::kFail, fmt::format("{} --version failed: {}", bin, why));
    return;
  }
  std::string first = out->output.substr(0, out->output.find('\n'));
  Add(r, "virtiofsd", Verdict::kOk, fmt::format("{} ({})", bin, first));
}

// Idle pool VMs' identical pages merge only while the host's KSM runs
// (QEMU marks guest RAM mergeable: its mem-merge default is on).
// guest.device_set: what the configured set needs of this host.
void CheckDeviceSet(const config::Config& config, HostReport& r) {
  const std::string_view name = config::DeviceSetName(config.guest.device_set);
  if (config.guest.device_set == config::DeviceSet::kVirtioFs) {
    Add(r, "device set", Verdict::kOk,
        fmt::format("{} (guest.device_set): files shared by virtiofsd, clones copy the template's RAM", name));
    return;
  }
  const erofs::ErofsOptions erofs;
  if (::access(erofs.mkfs.c_str(), X_OK) != 0) {
    Add(r, "device set", Verdict::kFail,
        fmt::format("{} (guest.device_set) makes containers' erofs images with {}: {} (install erofs-utils)", name,
                    erofs.mkfs, std::strerror(errno)));
    return;
  }
  // Sealing is what makes a private template mapping safe under a jailed VMM.
  UniqueFd probe(::memfd_create("capsule-check", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!probe || ::fcntl(probe.get(), F_ADD_SEALS, F_SEAL_WRITE) != 0 || !IsWriteSealed(probe.get())) {
    Add(r, "device set", Verdict::kFail,
        fmt::format("{} (guest.device_set) needs memfd write seals for its templates: {}", name, std::strerror(errno)));
    return;
  }
  Add(r, "device set", Verdict::kOk,
      fmt::format("{} (guest.device_set): copy-on-write clones of a sealed template, files on erofs disks ({}), "
                  "images cached in {}; read-write host directories are refused",
                  name, erofs.mkfs, config.runtime.image_cache_dir));
}

void CheckKsm(HostReport& r) {
  auto run = ReadFile("/sys/kernel/mm/ksm/run");
  if (!run.ok()) {
    Add(r, "KSM", Verdict::kWarn, "absent (/sys/kernel/mm/ksm): idle pool VMs share no pages");
    return;
  }
  const bool on = !run->empty() && (*run)[0] == '1';
  auto shared = ReadFile("/sys/kernel/mm/ksm/pages_sharing");
  std::string sharing = shared.ok() ? shared->substr(0, shared->find('\n')) : "?";
  Add(r, "KSM", on ? Verdict::kOk : Verdict::kWarn,
      on ? fmt::format("running, {} pages shared: idle pool VMs merge identical pages", sharing)
         : "stopped: idle pool VMs share no pages (echo 1 > /sys/kernel/mm/ksm/run to merge them)");
}

// The warm pool: whether a daemon answers at pool.socket.
void CheckPool(const config::Config& config, HostReport& r) {
  struct stat st{};
  if (config.pool.size == 0) {
    Add(r, "warm pool", Verdict::kOk, "off (pool.size 0): every pod cold-boots");
  } else if (::stat(config.pool.socket.c_str(), &st) != 0) {
    Add(r, "warm pool", Verdict::kWarn,
        fmt::format("no capsule-poold at {}: every pod cold-boots until it runs", config.pool.socket));
  } else {
    Add(r, "warm pool", Verdict::kOk,
        fmt::format("capsule-poold socket {} (capsule-runtime pool status for its VMs)", config.pool.socket));
  }
}

}  // namespace

bool HostReport::can_run_pods() const {
  for (const CheckItem& i : items) {
    if (i.verdict == Verdict::kFail) return false;
  }
  return true;
}

std::string HostReport::Summary() const {
  for (const CheckItem& i : items) {
    if (i.verdict == Verdict::kFail)
      return fmt::format("this host cannot run Capsule pods: {}: {}", i.name, i.detail);
  }
  std::string accel = items.empty() ? "" : items.front().detail.substr(0, items.front().detail.find(':'));
  return fmt::format("this host can run Capsule pods ({}{})", accel, warnings.empty() ? "" : ", with warnings");
}

// Optional: without it a guest loads only its image's own modules.
void CheckModuleTree(const config::Config& config, HostReport& r) {
  const std::string& dir = config.guest.modules;
  struct stat st{};
  if (dir.empty()) {
    Add(r, "guest module tree", Verdict::kWarn, "guest.modules is not set: no kernel modules on demand in guests");
  } else if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Add(r, "guest module tree", Verdict::kWarn,
        fmt::format("guest.modules {}: not a directory: no kernel modules on demand in guests", dir));
  } else {
    Add(r, "guest module tree", Verdict::kOk, dir);
  }
}

HostReport CheckHost(const config::Config& config) {
  HostReport r;
  CheckAccelerator(config, r);
  CheckQemu(config, r);
  CheckVsock(config, r);
  CheckFile(r, "guest kernel", "guest.kernel", config.guest.kernel);
  CheckFile(r, "guest initrd", "guest.initrd", config.guest.initrd);
  CheckModuleTree(config, r);
  CheckDeviceSet(config, r);
  if (config.guest.device_set == config::DeviceSet::kVirtioFs) CheckVirtiofsd(config, r);
  CheckKsm(r);
  CheckPool(config, r);
  return r;
}

}  // namespace capsule::cli
