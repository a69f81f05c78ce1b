// What goes into the guest initrd and where: capsule-agent as /init, the
// shared libraries ldd says it needs (the loader included), the kernel
// modules of the boot set with their dependencies from modules.dep and the
// load-order file the agent reads, /dev/console, and in a debug image
// busybox with its applet links.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deploy/mkinitrd/cpio_writer.h"
#include "runtime/common/status.h"

namespace capsule::deploy {

// Drivers a Capsule guest needs at boot: the virtio PCI transport, vsock to
// the host (the agent's channel), virtio-fs (+fuse) for the shared folder,
// overlay for container rootfs, virtio-net for pod NICs.
inline const std::vector<std::string> kDefaultBootModules = {
    "virtio_pci", "vmw_vsock_virtio_transport", "fuse", "virtiofs", "overlay", "virtio_net"};

struct KernelTree {
  std::string vmlinuz;      // <dir>/boot/vmlinuz-<release>
  std::string release;      // "6.1.0-57-amd64"
  std::string modules_dir;  // <dir>/lib/modules/<release>
  std::string description;  // capsule-kernel.env content, if any
};

// Finds the unpacked kernel in `dir` (deploy/fetch-guest-kernel.sh's
// output). FAILED_PRECONDITION telling to run `make deps` when it is absent.
Result<KernelTree> FindKernel(const std::string& dir);

// Host paths of the libraries in `ldd` output, the loader included, in
// output order; "not found" libraries are an error naming them.
Result<std::vector<std::string>> ParseLddOutput(std::string_view output);

// Shipped but loaded only on request (CreateSandbox.kernel_modules or
// capsule.modules=): entropy and memory balloon devices the host may add,
// 9p as a fallback shared filesystem, virtio_console for the serial vsock
// (capsule.vsock=serial; the agent loads it), virtio_scsi and sd_mod for
// disks (capsule.disks=scsi), erofs for read-only images on them (the agent
// loads it for a blk storage, after crc32c_generic: erofs needs libcrc32c,
// which needs a crc32c driver loaded first).
inline const std::vector<std::string> kDefaultOptionalModules = {
    "virtio_rng", "virtio_balloon", "9pnet_virtio", "9p", "virtio_console", "virtio_scsi", "sd_mod", "crc32c_generic",
    "erofs"};

struct ImageInputs {
  std::string agent;  // capsule-agent binary
  KernelTree kernel;
  std::vector<std::string> modules = kDefaultBootModules;
  std::vector<std::string> optional_modules = kDefaultOptionalModules;
  std::string busybox;  // empty: no busybox (production image)
};

struct ImageReport {
  std::vector<std::string> libraries;  // image paths
  std::vector<std::string> modules;    // boot load order, module names
  size_t optional_modules = 0;         // shipped beyond the boot set
  size_t busybox_applets = 0;
};

// Fills `archive`; reads every input file, runs ldd (and busybox --list-full).
Result<ImageReport> BuildImage(const ImageInputs& inputs, CpioArchive& archive);

}  // namespace capsule::deploy
