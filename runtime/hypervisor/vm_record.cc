// vm.json <-> VmRecord. Reading (JsonField) is strict about types and names
// the file and the field at fault; unknown fields are ignored so newer
// writers stay readable.
#include "runtime/hypervisor/vm_record.h"
#include "runtime/wire/agent_auth.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/common/json_field.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

json DeviceToJson(const Device& d) {
  json j = {{"kind", std::string(DeviceKind(d))}, {"id", DeviceId(d)}};
  if (auto* n = std::get_if<NetDevice>(&d)) {
    j["tap_name"] = n->tap_name;
    j["mac"] = n->mac;
    j["fd_name"] = n->fd_name;
  } else if (auto* v = std::get_if<VsockDevice>(&d)) {
    j["backend"] = v->backend == VsockDevice::Backend::kVhostKernel ? "vhost"
                   : v->backend == VsockDevice::Backend::kSerial    ? "serial"
                                                                    : "vhost-user";
    j["guest_cid"] = v->guest_cid;
    j["socket_path"] = v->socket_path;
  } else if (auto* f = std::get_if<FsShare>(&d)) {
    j["socket_path"] = f->socket_path;
    j["tag"] = f->tag;
    j["queue_size"] = f->queue_size;
  } else if (auto* b = std::get_if<BlockDevice>(&d)) {
    j["image"] = b->image;
    j["serial"] = b->serial;
    j["writable"] = b->writable;
  }
  return j;
}

Result<Device> DeviceFromJson(const JsonField& r) {
  RETURN_IF_ERROR(r.ExpectObject());
  std::string kind, id;
  RETURN_IF_ERROR(Required(r, "kind", &kind));
  RETURN_IF_ERROR(Required(r, "id", &id));
  if (kind == "net") {
    NetDevice n{id, "", "", ""};
    RETURN_IF_ERROR(Required(r, "tap_name", &n.tap_name));
    RETURN_IF_ERROR(Required(r, "mac", &n.mac));
    RETURN_IF_ERROR(Optional(r, "fd_name", &n.fd_name));  // absent in records before fd passing
    return Device(n);
  }
  if (kind == "vsock") {
    VsockDevice v;
    v.id = id;
    std::string backend;
    RETURN_IF_ERROR(Required(r, "backend", &backend));
    if (backend != "vhost" && backend != "vhost-user" && backend != "serial")
      return r["backend"].Error("must be 'vhost', 'vhost-user' or 'serial'");
    v.backend = backend == "vhost"    ? VsockDevice::Backend::kVhostKernel
                : backend == "serial" ? VsockDevice::Backend::kSerial
                                      : VsockDevice::Backend::kVhostUser;
    RETURN_IF_ERROR(Optional(r, "guest_cid", &v.guest_cid));
    RETURN_IF_ERROR(Optional(r, "socket_path", &v.socket_path));
    return Device(v);
  }
  if (kind == "fs") {
    FsShare f;
    f.id = id;
    RETURN_IF_ERROR(Required(r, "socket_path", &f.socket_path));
    RETURN_IF_ERROR(Required(r, "tag", &f.tag));
    RETURN_IF_ERROR(Optional(r, "queue_size", &f.queue_size));
    return Device(f);
  }
  if (kind == "block") {
    BlockDevice b;
    b.id = id;
    RETURN_IF_ERROR(Required(r, "image", &b.image));
    RETURN_IF_ERROR(Required(r, "serial", &b.serial));
    RETURN_IF_ERROR(Optional(r, "writable", &b.writable));
    return Device(b);
  }
  return r["kind"].Error(fmt::format("unknown device kind '{}'", kind));
}

std::optional<config::Accelerator> ParseRequestedAccel(std::string_view s) {
  if (s == "auto") return config::Accelerator::kAuto;
  if (s == "kvm") return config::Accelerator::kKvm;
  if (s == "tcg") return config::Accelerator::kTcg;
  return std::nullopt;
}

json SpecToJson(const VmSpec& s) {
  json devices = json::array();
  for (const Device& d : s.devices) devices.push_back(DeviceToJson(d));
  json j = {{"id", s.id},
            {"state_dir", s.state_dir},
            {"vcpus", s.vcpus},
            {"memory_mib", s.memory_mib},
            {"kernel", s.kernel},
            {"initrd", s.initrd},
            {"kernel_cmdline", s.kernel_cmdline},
            {"extra_kernel_params", s.extra_kernel_params},
            {"devices", devices},
            {"console_log", s.console_log},
            {"start_paused", s.start_paused},
            {"hotplug_slots", s.hotplug_slots},
            {"scsi_controller", s.scsi_controller},
            {"memory_file", s.memory_file},
            {"memory_private", s.memory_private},
            {"incoming", s.incoming},
            {"vmgenid", s.vmgenid},
            {"agent_token", s.agent_token},
            {"extra_args", s.extra_args}};
  if (s.accelerator) j["accelerator"] = std::string(config::AcceleratorName(*s.accelerator));
  return j;
}

Status SpecFromJson(const JsonField& r, VmSpec& s) {
  RETURN_IF_ERROR(r.ExpectObject());
  RETURN_IF_ERROR(Required(r, "id", &s.id));
  RETURN_IF_ERROR(Required(r, "state_dir", &s.state_dir));
  RETURN_IF_ERROR(Required(r, "vcpus", &s.vcpus));
  RETURN_IF_ERROR(Required(r, "memory_mib", &s.memory_mib));
  RETURN_IF_ERROR(Optional(r, "kernel", &s.kernel));
  RETURN_IF_ERROR(Optional(r, "initrd", &s.initrd));
  RETURN_IF_ERROR(Optional(r, "kernel_cmdline", &s.kernel_cmdline));
  RETURN_IF_ERROR(Optional(r, "extra_kernel_params", &s.extra_kernel_params));
  RETURN_IF_ERROR(Optional(r, "console_log", &s.console_log));
  RETURN_IF_ERROR(Optional(r, "start_paused", &s.start_paused));
  RETURN_IF_ERROR(Optional(r, "hotplug_slots", &s.hotplug_slots));
  RETURN_IF_ERROR(Optional(r, "scsi_controller", &s.scsi_controller));
  RETURN_IF_ERROR(Optional(r, "memory_file", &s.memory_file));
  RETURN_IF_ERROR(Optional(r, "memory_private", &s.memory_private));
  RETURN_IF_ERROR(Optional(r, "incoming", &s.incoming));
  RETURN_IF_ERROR(Optional(r, "vmgenid", &s.vmgenid));
  RETURN_IF_ERROR(Optional(r, "agent_token", &s.agent_token));
  if (!s.agent_token.empty() && !agent_auth::IsWellFormedToken(s.agent_token))
    return r["agent_token"].Error("must be 64 lowercase hex digits");
  RETURN_IF_ERROR(Optional(r, "extra_args", &s.extra_args));
  std::string accel;
  RETURN_IF_ERROR(Optional(r, "accelerator", &accel));
  if (!accel.empty()) {
    s.accelerator = ParseRequestedAccel(accel);
    if (!s.accelerator) return r["accelerator"].Error("must be auto, kvm or tcg");
  }
  return r["devices"].ForEach([&](const JsonField& d) -> Status {
    ASSIGN_OR_RETURN(Device dev, DeviceFromJson(d));
    s.devices.push_back(std::move(dev));
    return Status::Ok();
  });
}

Result<VmRecord> ReadVmRecord(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseJson(text, "vm record"));
  JsonField r(&j, "");
  RETURN_IF_ERROR(r.ExpectObject());
  int version = 0;
  RETURN_IF_ERROR(Required(r, "version", &version));
  if (version != VmRecord::kFormatVersion)
    return r["version"].Error(fmt::format("format {} is not supported (this build reads {})", version, VmRecord::kFormatVersion));
  VmRecord rec;
  RETURN_IF_ERROR(Required(r, "hypervisor", &rec.hypervisor));
  RETURN_IF_ERROR(SpecFromJson(r["spec"], rec.spec));
  std::string accel;
  RETURN_IF_ERROR(Required(r, "accelerator", &accel));
  if (accel != "kvm" && accel != "tcg") return r["accelerator"].Error("must be kvm or tcg");
  rec.accelerator = accel == "kvm" ? Accelerator::kKvm : Accelerator::kTcg;
  JsonField vmm = r["vmm"];
  RETURN_IF_ERROR(vmm.ExpectObject());
  int64_t pid = 0;
  RETURN_IF_ERROR(RequiredInRange(vmm, "pid", 1, std::numeric_limits<pid_t>::max(), &pid));
  rec.vmm.pid = static_cast<pid_t>(pid);
  RETURN_IF_ERROR(Required(vmm, "start_time", &rec.vmm.start_time));
  RETURN_IF_ERROR(Required(vmm, "boot_id", &rec.vmm.boot_id));
  RETURN_IF_ERROR(Required(vmm, "binary", &rec.vmm_binary));
  RETURN_IF_ERROR(Optional(vmm, "version", &rec.vmm_version));
  if (JsonField uid = vmm["uid"]; !uid.null()) RETURN_IF_ERROR(uid.Read(&rec.vmm_uid, -1, 0xffffffffll));
  RETURN_IF_ERROR(Required(r, "qmp_socket", &rec.qmp_socket));
  RETURN_IF_ERROR(Required(r, "vmm_log", &rec.vmm_log));
  RETURN_IF_ERROR(r["hotplugged"].ForEach([&](const JsonField& d) -> Status {
    ASSIGN_OR_RETURN(Device dev, DeviceFromJson(d));
    HotpluggedDevice h{std::move(dev), ""};
    RETURN_IF_ERROR(Required(d, "port", &h.port));
    rec.hotplugged.push_back(std::move(h));
    return Status::Ok();
  }));
  return rec;
}

}  // namespace

bool VmRecord::operator==(const VmRecord& o) const {
  return hypervisor == o.hypervisor && spec == o.spec && accelerator == o.accelerator && vmm.pid == o.vmm.pid &&
         vmm.start_time == o.vmm.start_time && vmm.boot_id == o.vmm.boot_id && vmm_uid == o.vmm_uid && vmm_binary == o.vmm_binary &&
         vmm_version == o.vmm_version && qmp_socket == o.qmp_socket && vmm_log == o.vmm_log && hotplugged == o.hotplugged;
}

std::string VmRecordToJson(const VmRecord& r) {
  json hot = json::array();
  for (const auto& h : r.hotplugged) {
    json d = DeviceToJson(h.device);
    d["port"] = h.port;
    hot.push_back(std::move(d));
  }
  json j = {{"version", VmRecord::kFormatVersion},
            {"hypervisor", r.hypervisor},
            {"spec", SpecToJson(r.spec)},
            {"accelerator", std::string(AcceleratorName(r.accelerator))},
            {"vmm", {{"pid", r.vmm.pid}, {"start_time", r.vmm.start_time}, {"boot_id", r.vmm.boot_id},
                     {"binary", r.vmm_binary}, {"version", r.vmm_version}, {"uid", r.vmm_uid}}},
            {"qmp_socket", r.qmp_socket},
            {"vmm_log", r.vmm_log},
            {"hotplugged", hot}};
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<VmRecord> VmRecordFromJson(std::string_view text, std::string_view source) {
  auto rec = ReadVmRecord(text);
  if (!rec.ok()) return rec.status().WithContext(source);
  return rec;
}

}  // namespace capsule::hypervisor
