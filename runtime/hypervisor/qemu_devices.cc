// Device -> QEMU mapping. Taps come as an fd (inherited at boot, passed
// with getfd for a hot-plug) or, where QEMU may open them, by name with no
// helper scripts (script=no: the sandbox forbids spawning, and Capsule's
// network code owns the tap's setup), and run without vhost-net (needs
// /dev/vhost-net, absent on many hosts; a later option). vhost-user devices
// reach their back end through a client chardev on a socket we connected,
// and kernel vhost-vsock gets the vhost fd that holds its CID: a VMM that
// runs unprivileged opens no path of the VM's state dir.
#include "runtime/hypervisor/qemu_devices.h"

#include <fmt/format.h>

#include "runtime/wire/guest_abi.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

std::string VhostUserDriver(const Device& d) {
  return std::holds_alternative<FsShare>(d) ? "vhost-user-fs-pci" : "vhost-user-vsock-pci";
}

bool IsSerialVsock(const Device& d) {
  auto* v = std::get_if<VsockDevice>(&d);
  return v != nullptr && v->backend == VsockDevice::Backend::kSerial;
}

bool UsesChardev(const Device& d) { return ConnectsSocket(d); }

bool PassesVhostFd(const Device& d) {
  auto* v = std::get_if<VsockDevice>(&d);
  return v != nullptr && v->backend == VsockDevice::Backend::kVhostKernel && v->vhost_fd >= 0;
}

const std::string& SocketPath(const Device& d) {
  if (auto* f = std::get_if<FsShare>(&d)) return f->socket_path;
  return std::get<VsockDevice>(d).socket_path;
}

// Where the netdev gets its tap: a passed fd, or opened by name (then
// without QEMU's ifup/ifdown scripts).
std::string TapSource(const NetDevice& n) {
  if (!n.fd_name.empty()) return "fd=" + n.fd_name;
  return fmt::format("ifname={},script=no,downscript=no", n.tap_name);
}

// device_add properties as (name, value) pairs, shared by both paths;
// `vhostfd`: the kernel vsock's fd (a number at boot, a getfd name later).
std::vector<std::pair<std::string, json>> DeviceProps(const Device& d, const std::string& vhostfd) {
  std::vector<std::pair<std::string, json>> p;
  if (auto* n = std::get_if<NetDevice>(&d)) {
    p = {{"driver", "virtio-net-pci"}, {"netdev", BackendId(d)}, {"mac", n->mac}};
  } else if (auto* v = std::get_if<VsockDevice>(&d); v != nullptr && v->backend == VsockDevice::Backend::kVhostKernel) {
    p = {{"driver", "vhost-vsock-pci"}, {"guest-cid", v->guest_cid}};
    if (!vhostfd.empty()) p.emplace_back("vhostfd", vhostfd);
  } else if (auto* f = std::get_if<FsShare>(&d)) {
    p = {{"driver", VhostUserDriver(d)}, {"chardev", BackendId(d)}, {"tag", f->tag}, {"queue-size", f->queue_size}};
  } else if (auto* b = std::get_if<BlockDevice>(&d)) {
    p = {{"driver", "scsi-hd"}, {"drive", BackendId(d)}, {"serial", b->serial}};
  } else if (IsSerialVsock(d)) {
    p = {{"driver", "virtserialport"},
         {"bus", SerialBusId(d) + ".0"},
         {"chardev", BackendId(d)},
         {"name", std::string(guest_abi::kVsockSerialPortName)}};
  } else {
    p = {{"driver", VhostUserDriver(d)}, {"chardev", BackendId(d)}};
  }
  p.emplace_back("id", DeviceId(d));
  return p;
}

std::string OptString(const std::vector<std::pair<std::string, json>>& props) {
  std::string out;
  for (const auto& [k, v] : props) {
    if (k == "driver") {
      out = v.get<std::string>() + out;
      continue;
    }
    out += fmt::format(",{}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

}  // namespace

std::string BackendId(const Device& d) { return DeviceId(d) + "-be"; }

bool IsVhostUser(const Device& d) {
  if (std::holds_alternative<FsShare>(d)) return true;
  auto* v = std::get_if<VsockDevice>(&d);
  return v != nullptr && v->backend == VsockDevice::Backend::kVhostUser;
}

bool ConnectsSocket(const Device& d) { return IsVhostUser(d) || IsSerialVsock(d); }

std::string SerialBusId(const Device& d) { return DeviceId(d) + "-bus"; }

std::string PassedFdName(const Device& d) { return DeviceId(d) + "-fd"; }

std::vector<std::string> DeviceBootArgs(const Device& d, int fd) {
  std::vector<std::string> args;
  if (auto* n = std::get_if<NetDevice>(&d)) {
    const std::string source = fd >= 0 ? fmt::format("fd={}", fd) : TapSource(*n);
    args = {"-netdev", fmt::format("tap,id={},{},vhost=off", BackendId(d), source)};
  } else if (UsesChardev(d)) {
    const std::string source = fd >= 0 ? fmt::format("fd={}", fd) : "path=" + SocketPath(d);
    args = {"-chardev", fmt::format("socket,id={},{}", BackendId(d), source)};
  }
  if (IsSerialVsock(d)) {
    args.push_back("-device");
    args.push_back("virtio-serial-pci,id=" + SerialBusId(d));
  }
  args.push_back("-device");
  args.push_back(OptString(DeviceProps(d, PassesVhostFd(d) && fd >= 0 ? std::to_string(fd) : "")));
  return args;
}

std::vector<QmpStep> BackendAddSteps(const Device& d, uint64_t fdset) {
  if (auto* n = std::get_if<NetDevice>(&d)) {
    json args = {{"type", "tap"}, {"id", BackendId(d)}, {"vhost", false}};
    if (n->fd_name.empty()) {
      args.update(json{{"ifname", n->tap_name}, {"script", "no"}, {"downscript", "no"}});
    } else {
      args["fd"] = n->fd_name;  // QEMU takes the fd out of its getfd list
    }
    return {{"netdev_add", args}};
  }
  if (auto* b = std::get_if<BlockDevice>(&d)) {
    // QEMU opens /dev/fdset/N by taking a dup of the set's fd whose access
    // mode matches: the caller's fd decides what the disk may do.
    return {{"blockdev-add", json{{"driver", "file"},
                                  {"node-name", BackendId(d)},
                                  {"filename", fmt::format("/dev/fdset/{}", fdset)},
                                  {"read-only", !b->writable}}}};
  }
  if (!UsesChardev(d)) return {};
  json backend = {{"type", "socket"},
                  {"data", {{"addr", {{"type", "fd"}, {"data", {{"str", PassedFdName(d)}}}}}, {"server", false}}}};
  return {{"chardev-add", json{{"id", BackendId(d)}, {"backend", backend}}}};
}

QmpStep DeviceAddStep(const Device& d, const std::string& bus) {
  json args = json::object();
  for (const auto& [k, v] : DeviceProps(d, PassesVhostFd(d) ? PassedFdName(d) : "")) args[k] = v;
  args["bus"] = bus;
  return {"device_add", args};
}

std::vector<QmpStep> PassedFdReleaseSteps(const Device& d, uint64_t fdset) {
  // The blockdev holds its own dup; the set goes once nothing uses it.
  if (std::holds_alternative<BlockDevice>(d)) return {{"remove-fd", json{{"fdset-id", fdset}}}};
  if (UsesChardev(d) || PassesVhostFd(d)) return {{"closefd", json{{"fdname", PassedFdName(d)}}}};
  auto* n = std::get_if<NetDevice>(&d);
  if (n == nullptr || n->fd_name.empty()) return {};
  return {{"closefd", json{{"fdname", n->fd_name}}}};
}

std::vector<QmpStep> BackendRemoveSteps(const Device& d) {
  if (std::holds_alternative<NetDevice>(d)) return {{"netdev_del", json{{"id", BackendId(d)}}}};
  if (UsesChardev(d)) return {{"chardev-remove", json{{"id", BackendId(d)}}}};
  if (std::holds_alternative<BlockDevice>(d)) return {{"blockdev-del", json{{"node-name", BackendId(d)}}}};
  return {};
}

}  // namespace capsule::hypervisor
