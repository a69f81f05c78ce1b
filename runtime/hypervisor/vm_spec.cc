// VmSpec validation: every check names the VM, the field and the bad value,
// so a caller's mistake never surfaces as a cryptic VMM error.
#include "runtime/hypervisor/vm_spec.h"
#include "runtime/wire/agent_auth.h"

#include <fmt/format.h>

#include <set>

namespace capsule::hypervisor {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool IsValidVmId(std::string_view id) {
  if (id.empty() || id.size() > kMaxVmIdLen || id == "." || id == "..") return false;
  if (id.front() == '.' || id.front() == '-') return false;
  for (char c : id) {
    if (!IsIdChar(c)) return false;
  }
  return true;
}

bool IsValidMac(std::string_view mac) {
  if (mac.size() != 17) return false;
  for (size_t i = 0; i < mac.size(); ++i) {
    char c = mac[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (i % 3 == 2 ? c != ':' : !hex) return false;
  }
  // Bit 0 of the first octet marks multicast: not a NIC address.
  int first = std::stoi(std::string(mac.substr(0, 2)), nullptr, 16);
  return (first & 1) == 0;
}

Status CheckSocketPath(std::string_view what, const std::string& path) {
  if (path.empty() || path.front() != '/') return InvalidArgument(fmt::format("{}: socket path must be absolute, got '{}'", what, path));
  if (path.size() > kMaxUnixPathLen)
    return InvalidArgument(fmt::format("{}: socket path '{}' is {} bytes, unix sockets allow {}", what, path,
                                       path.size(), kMaxUnixPathLen));
  return Status::Ok();
}

// QEMU option values are comma-separated; a comma in a path would need ",,"
// escaping that a second VMM would not understand, so it is refused outright.
Status CheckNoComma(std::string_view what, const std::string& value) {
  if (value.find(',') != std::string::npos)
    return InvalidArgument(fmt::format("{} '{}' must not contain ','", what, value));
  return Status::Ok();
}

Status ValidateNet(const NetDevice& d) {
  if (!d.fd_name.empty() && !IsValidFdName(d.fd_name))
    return InvalidArgument(fmt::format("net device '{}': fd_name '{}' must match [A-Za-z][A-Za-z0-9_.-]{{0,31}}", d.id, d.fd_name));
  // With an fd the tap is known by it, and its name only labels logs.
  if ((d.fd_name.empty() && d.tap_name.empty()) || d.tap_name.size() > 15)
    return InvalidArgument(fmt::format("net device '{}': tap_name must be 1..15 chars, got '{}'", d.id, d.tap_name));
  for (char c : d.tap_name) {
    if (!IsIdChar(c)) return InvalidArgument(fmt::format("net device '{}': bad tap_name '{}'", d.id, d.tap_name));
  }
  if (!IsValidMac(d.mac))
    return InvalidArgument(fmt::format("net device '{}': mac '{}' is not a unicast aa:bb:cc:dd:ee:ff address", d.id, d.mac));
  return Status::Ok();
}

Status ValidateVsock(const VsockDevice& d) {
  std::string what = fmt::format("vsock device '{}'", d.id);
  if (d.backend == VsockDevice::Backend::kVhostKernel) {
    // CIDs 0..2 are reserved (hypervisor, local, host); from linux/vm_sockets.h.
    if (d.guest_cid < 3 || d.guest_cid == 0xffffffffu)
      return InvalidArgument(fmt::format("{}: guest_cid must be 3..2^32-2, got {}", what, d.guest_cid));
    return Status::Ok();
  }
  RETURN_IF_ERROR(CheckSocketPath(what, d.socket_path));
  return CheckNoComma(what + " socket_path", d.socket_path);
}

Status ValidateFs(const FsShare& d) {
  std::string what = fmt::format("fs share '{}'", d.id);
  RETURN_IF_ERROR(CheckSocketPath(what, d.socket_path));
  RETURN_IF_ERROR(CheckNoComma(what + " socket_path", d.socket_path));
  // The virtio-fs config space holds 36 bytes of tag (linux/virtio_fs.h).
  if (d.tag.empty() || d.tag.size() > 36) return InvalidArgument(fmt::format("{}: tag must be 1..36 bytes", what));
  RETURN_IF_ERROR(CheckNoComma(what + " tag", d.tag));
  if (d.queue_size == 0 || d.queue_size > 1024 || (d.queue_size & (d.queue_size - 1)) != 0)
    return InvalidArgument(fmt::format("{}: queue_size must be a power of two up to 1024, got {}", what, d.queue_size));
  return Status::Ok();
}

Status ValidateBlock(const BlockDevice& d) {
  std::string what = fmt::format("block device '{}'", d.id);
  bool ok = !d.serial.empty() && d.serial.size() <= kMaxBlockSerialLen;
  for (char c : d.serial) ok = ok && IsIdChar(c);
  if (!ok)
    return InvalidArgument(fmt::format("{}: serial must be 1..{} chars of [A-Za-z0-9_.-], got '{}'", what,
                                       kMaxBlockSerialLen, d.serial));
  return Status::Ok();
}

}  // namespace

std::string_view AcceleratorName(Accelerator a) { return a == Accelerator::kKvm ? "kvm" : "tcg"; }

const std::string& DeviceId(const Device& d) {
  return std::visit([](const auto& x) -> const std::string& { return x.id; }, d);
}

std::string_view DeviceKind(const Device& d) {
  switch (d.index()) {
    case 0: return "net";
    case 1: return "vsock";
    case 2: return "fs";
    default: return "block";
  }
}

bool IsValidDeviceId(std::string_view id) {
  // QEMU ids: a letter first, then letters, digits, '-', '.', '_'; we keep
  // 32 chars so derived back-end ids ("<id>-be") stay short.
  if (id.empty() || id.size() > 32) return false;
  if (!((id[0] >= 'a' && id[0] <= 'z') || (id[0] >= 'A' && id[0] <= 'Z'))) return false;
  for (char c : id) {
    if (!IsIdChar(c)) return false;
  }
  return true;
}

bool IsValidFdName(std::string_view name) { return IsValidDeviceId(name); }

Status ValidateDevice(const Device& device) {
  const std::string& id = DeviceId(device);
  if (!IsValidDeviceId(id))
    return InvalidArgument(fmt::format("{} device id '{}' must match [A-Za-z][A-Za-z0-9_.-]{{0,31}}", DeviceKind(device), id));
  // "rp<N>" names our hot-plug root ports.
  if (id.size() > 2 && id.rfind("rp", 0) == 0 && id.find_first_not_of("0123456789", 2) == std::string::npos)
    return InvalidArgument(fmt::format("device id '{}' is reserved for hot-plug ports", id));
  return std::visit(
      [](const auto& d) -> Status {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, NetDevice>) return ValidateNet(d);
        if constexpr (std::is_same_v<T, VsockDevice>) return ValidateVsock(d);
        if constexpr (std::is_same_v<T, FsShare>) return ValidateFs(d);
        if constexpr (std::is_same_v<T, BlockDevice>) return ValidateBlock(d);
      },
      device);
}

Status ValidateVmSpec(const VmSpec& s) {
  if (!IsValidVmId(s.id))
    return InvalidArgument(fmt::format("vm spec: id '{}' must be 1..{} chars of [A-Za-z0-9_.-], not starting with '.' or '-'", s.id, kMaxVmIdLen));
  auto bad = [&](std::string msg) { return InvalidArgument(fmt::format("vm spec '{}': {}", s.id, msg)); };
  if (s.state_dir.empty() || s.state_dir.front() != '/') return bad(fmt::format("state_dir must be absolute, got '{}'", s.state_dir));
  if (!s.agent_token.empty() && !agent_auth::IsWellFormedToken(s.agent_token))
    return bad("agent_token must be 64 lowercase hex digits");
  if (s.vcpus < 1 || s.vcpus > kMaxVcpus) return bad(fmt::format("vcpus must be 1..{}, got {}", kMaxVcpus, s.vcpus));
  if (s.memory_mib < kMinMemoryMib) return bad(fmt::format("memory_mib must be at least {}, got {}", kMinMemoryMib, s.memory_mib));
  if (s.hotplug_slots > kMaxHotplugSlots) return bad(fmt::format("hotplug_slots must be at most {}, got {}", kMaxHotplugSlots, s.hotplug_slots));
  if (s.kernel.empty() && (!s.initrd.empty() || !s.kernel_cmdline.empty()))
    return bad("initrd or kernel_cmdline given without a kernel");
  if (!s.memory_file.empty() && s.memory_fd >= 0) return bad("memory_file and memory_fd are exclusive");
  if (!s.memory_file.empty() && s.memory_file.front() != '/')
    return bad(fmt::format("memory_file must be absolute, got '{}'", s.memory_file));
  RETURN_IF_ERROR(CheckNoComma(fmt::format("vm spec '{}': memory_file", s.id), s.memory_file));
  if (s.memory_private && s.memory_file.empty() && s.memory_fd < 0)
    return bad("memory_private needs a memory_file or a memory_fd");
  if (s.memory_private) {
    for (const Device& d : s.devices) {
      auto* v = std::get_if<VsockDevice>(&d);
      if (std::holds_alternative<FsShare>(d) || (v != nullptr && v->backend == VsockDevice::Backend::kVhostUser))
        return bad(fmt::format("device '{}' is vhost-user: its back end maps guest RAM itself and would not see a "
                               "copy-on-write guest's writes (memory_private)", DeviceId(d)));
    }
  }
  // Paths go into QEMU's comma-separated option syntax.
  for (const auto* p : {&s.state_dir, &s.console_log}) RETURN_IF_ERROR(CheckNoComma(fmt::format("vm spec '{}': path", s.id), *p));
  std::set<std::string> ids;
  for (const Device& d : s.devices) {
    RETURN_IF_ERROR_CTX(ValidateDevice(d), fmt::format("vm spec '{}'", s.id));
    // Fds are passed over QMP, which exists only once the VMM runs.
    if (auto* n = std::get_if<NetDevice>(&d); n != nullptr && !n->fd_name.empty())
      return bad(fmt::format("net device '{}': fd_name works for hot-plug only, not at boot", n->id));
    if (std::holds_alternative<BlockDevice>(d))
      return bad(fmt::format("block device '{}' is hot-plugged, not attached at boot", DeviceId(d)));
    if (!ids.insert(DeviceId(d)).second) return bad(fmt::format("device id '{}' used twice", DeviceId(d)));
  }
  return Status::Ok();
}

}  // namespace capsule::hypervisor
