// See shape.h.
#include "runtime/pool/shape.h"

#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/sha256.h"

namespace capsule::pool {
namespace {

Result<std::string> FileIdentity(std::string_view key, const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(fmt::format("{} {}", key, path));
  return fmt::format("{}={}:{}:{}.{}:{}:{}", key, path, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_dev,
                     st.st_ino);
}

// The devices a VM boots with as this build makes them. A template's
// device state restores only into a VMM with the same devices, so a build
// that changes them (2: disks on a virtio-scsi controller instead of root
// ports) makes new keys, and the pool builds new templates.
constexpr int kVmLayout = 2;

}  // namespace

Shape Resolve(const config::Config& config, Shape shape) {
  if (shape.vcpus == 0) shape.vcpus = config.guest.default_vcpus;
  if (shape.memory_mib == 0) shape.memory_mib = config.guest.default_memory_mib;
  return shape;
}

Result<std::string> ShapeKey(const config::Config& c, const Shape& s) {
  std::string text = fmt::format("layout={};vcpus={};memory_mib={};", kVmLayout, s.vcpus, s.memory_mib);
  for (auto [key, path] : {std::pair<std::string_view, const std::string&>{"guest.kernel", c.guest.kernel},
                           {"guest.initrd", c.guest.initrd},
                           {"hypervisor.path", c.hypervisor.path},
                           {"virtiofs.daemon", c.virtiofs.daemon}}) {
    ASSIGN_OR_RETURN(std::string id, FileIdentity(key, path));
    text += id + ";";
  }
  text += fmt::format("accel={};kernel_params={};tb={};seccomp={};vsock={};cache={};boot_nic={};modules={};"
                      "modules_allow={};device_set={}",
                      config::AcceleratorName(c.hypervisor.accelerator), c.hypervisor.kernel_params,
                      c.hypervisor.tcg_tb_size_mib, c.hypervisor.seccomp_sandbox,
                      config::VsockBackendName(c.vsock.backend), c.virtiofs.cache, c.guest.boot_nic, c.guest.modules,
                      fmt::join(c.guest.modules_allow, ","), config::DeviceSetName(c.guest.device_set));
  return Sha256Hex(text).substr(0, 16);
}

std::string Describe(const Shape& s) {
  return fmt::format("{} vCPU{}, {} MiB", s.vcpus, s.vcpus == 1 ? "" : "s", s.memory_mib);
}

}  // namespace capsule::pool
