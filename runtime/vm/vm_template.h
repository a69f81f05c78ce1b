// A VM template: one VM of a shape booted until its agent listens, with no
// device QEMU cannot migrate (vhost-user-vsock is unmigratable in QEMU 7.2
// and vhost-user-fs until 8.2: both are hot-plugged into each clone
// instead, into root ports the template reserves), then saved as two files
// under <root>/<key>/:
//   ram    the guest's RAM as a file (memory-backend-file, share=on): the
//          guest wrote it while it ran, nothing copies it at save
//   state  QEMU's device state (a migration stream with x-ignore-shared,
//          a few hundred KB)
// plus template.json. A clone (SandboxVm::Restore) loads `state` over RAM
// made from `ram`: with guest.device_set virtio-fs a copy of its own
// (vhost-user back ends map guest RAM), with dense the template's one sealed
// copy mapped private (ram_image.h), so clones share its unwritten pages. The key identifies everything the
// VM was booted from (pool::ShapeKey); a changed image makes a new key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"

namespace capsule::vm {

// Root ports a template (and so each of its clones) has: the clone's
// vsock and virtio-fs devices take two, the pod's NICs get as many as a
// cold-booted VM has (hypervisor::VmSpec's default 4).
inline constexpr uint32_t kTemplateHotplugSlots = 6;

struct TemplateSpec {
  std::string key;  // [0-9a-f]{16}: names the dir
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
};

struct VmTemplate {
  static constexpr int kFormatVersion = 1;

  std::string dir;
  std::string key;
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
  uint32_t hotplug_slots = 0;
  std::string boot_nic_mac;  // "" when built without guest.boot_nic
  int64_t created_unix_ms = 0;
  double build_ms = 0;
  std::string vmm_version;
  uint64_t ram_allocated_bytes = 0;  // of the RAM image (the rest are holes)
  uint64_t state_bytes = 0;
  // The dense device set's clones map this private: `ram` copied once into
  // a write-sealed memfd (AttachSealedRam); null until then. Shared by the
  // copies of this struct that refill threads hold, closed with the last.
  std::shared_ptr<const UniqueFd> sealed_ram;

  std::string ram_path() const { return dir + "/ram"; }
  std::string state_path() const { return dir + "/state"; }
};

std::string TemplateDir(const std::string& root, const std::string& key);

// Boots, saves and stops a template VM. Built in <root>/<key>.building/ and
// renamed into place, so a template dir is always complete; an existing
// template of the key is replaced. On failure nothing is left.
Result<VmTemplate> BuildTemplate(const config::Config& config, const std::string& root, const TemplateSpec& spec);

// Reads <dir>/template.json and checks its files; errors name the file and
// the field.
Result<VmTemplate> LoadTemplate(const std::string& dir);
std::string TemplateToJson(const VmTemplate& t);
// Makes t.sealed_ram (SealedRamImage of t.ram_path()) unless it is there.
Status AttachSealedRam(VmTemplate& t);
Result<VmTemplate> TemplateFromJson(std::string_view text, std::string_view source);

// Removes a template dir, or an unfinished build's (stopping a VMM still
// running in it). A missing dir is fine.
Status RemoveTemplate(const config::Config& config, const std::string& dir);

}  // namespace capsule::vm
