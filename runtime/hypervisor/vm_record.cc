// vm.json <-> VmRecord. Reading is strict about types and names the field
// at fault; unknown fields are ignored so newer writers stay readable.
#include "runtime/common/agent_auth.h"
#include "runtime/hypervisor/vm_record.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

// Typed field access with the JSON path in every error.
class Reader {
 public:
  Reader(const json& obj, std::string path, std::string_view source) : obj_(obj), path_(std::move(path)), source_(source) {}

  Status Error(std::string_view key, std::string_view what) const {
    return InvalidArgument(fmt::format("{}: field '{}{}': {}", source_, path_, key, what));
  }
  Result<const json*> Get(std::string_view key, bool required) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) return Error(key, "missing");
      return static_cast<const json*>(nullptr);
    }
    return &*it;
  }
  Status Str(std::string_view key, std::string& out, bool required = true) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, required));
    if (j == nullptr) return Status::Ok();
    if (!j->is_string()) return Error(key, "expected a string");
    out = j->get<std::string>();
    return Status::Ok();
  }
  template <typename T>
  Status Uint(std::string_view key, T& out, bool required = true) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, required));
    if (j == nullptr) return Status::Ok();
    if (!j->is_number_unsigned() || j->get<uint64_t>() > std::numeric_limits<T>::max())
      return Error(key, "expected an unsigned integer in range");
    out = static_cast<T>(j->get<uint64_t>());
    return Status::Ok();
  }
  Status Bool(std::string_view key, bool& out, bool required = true) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, required));
    if (j == nullptr) return Status::Ok();
    if (!j->is_boolean()) return Error(key, "expected a boolean");
    out = j->get<bool>();
    return Status::Ok();
  }
  Result<Reader> Object(std::string_view key) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, true));
    if (!j->is_object()) return Error(key, "expected an object");
    return Reader(*j, fmt::format("{}{}.", path_, key), source_);
  }
  Result<const json*> Array(std::string_view key) const {
    ASSIGN_OR_RETURN(const json* j, Get(key, false));
    if (j != nullptr && !j->is_array()) return Error(key, "expected an array");
    return j;
  }
  Status StrList(std::string_view key, std::vector<std::string>& out) const {
    ASSIGN_OR_RETURN(const json* j, Array(key));
    if (j == nullptr) return Status::Ok();
    for (const json& e : *j) {
      if (!e.is_string()) return Error(key, "expected an array of strings");
      out.push_back(e.get<std::string>());
    }
    return Status::Ok();
  }
  const std::string& path() const { return path_; }
  std::string_view source() const { return source_; }

 private:
  const json& obj_;
  std::string path_;
  std::string_view source_;
};

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

Result<Device> DeviceFromJson(const Reader& r) {
  std::string kind, id;
  RETURN_IF_ERROR(r.Str("kind", kind));
  RETURN_IF_ERROR(r.Str("id", id));
  if (kind == "net") {
    NetDevice n{id, "", "", ""};
    RETURN_IF_ERROR(r.Str("tap_name", n.tap_name));
    RETURN_IF_ERROR(r.Str("mac", n.mac));
    RETURN_IF_ERROR(r.Str("fd_name", n.fd_name, false));  // absent in records before fd passing
    return Device(n);
  }
  if (kind == "vsock") {
    VsockDevice v;
    v.id = id;
    std::string backend;
    RETURN_IF_ERROR(r.Str("backend", backend));
    if (backend != "vhost" && backend != "vhost-user" && backend != "serial")
      return r.Error("backend", "expected 'vhost', 'vhost-user' or 'serial'");
    v.backend = backend == "vhost"    ? VsockDevice::Backend::kVhostKernel
                : backend == "serial" ? VsockDevice::Backend::kSerial
                                      : VsockDevice::Backend::kVhostUser;
    RETURN_IF_ERROR(r.Uint("guest_cid", v.guest_cid, false));
    RETURN_IF_ERROR(r.Str("socket_path", v.socket_path, false));
    return Device(v);
  }
  if (kind == "fs") {
    FsShare f;
    f.id = id;
    RETURN_IF_ERROR(r.Str("socket_path", f.socket_path));
    RETURN_IF_ERROR(r.Str("tag", f.tag));
    RETURN_IF_ERROR(r.Uint("queue_size", f.queue_size, false));
    return Device(f);
  }
  if (kind == "block") {
    BlockDevice b;
    b.id = id;
    RETURN_IF_ERROR(r.Str("image", b.image));
    RETURN_IF_ERROR(r.Str("serial", b.serial));
    RETURN_IF_ERROR(r.Bool("writable", b.writable, false));
    return Device(b);
  }
  return r.Error("kind", fmt::format("unknown device kind '{}'", kind));
}

Status DeviceList(const Reader& r, std::string_view key, auto&& each) {
  ASSIGN_OR_RETURN(const json* arr, r.Array(key));
  if (arr == nullptr) return Status::Ok();
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string elem = fmt::format("{}[{}]", key, i);
    if (!(*arr)[i].is_object()) return r.Error(elem, "expected an object");
    Reader er((*arr)[i], fmt::format("{}{}.", r.path(), elem), r.source());
    RETURN_IF_ERROR(each(er));
  }
  return Status::Ok();
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
            {"memory_file", s.memory_file},
            {"memory_private", s.memory_private},
            {"incoming", s.incoming},
            {"vmgenid", s.vmgenid},
            {"agent_token", s.agent_token},
            {"extra_args", s.extra_args}};
  if (s.accelerator) j["accelerator"] = std::string(config::AcceleratorName(*s.accelerator));
  return j;
}

Status SpecFromJson(const Reader& r, VmSpec& s) {
  RETURN_IF_ERROR(r.Str("id", s.id));
  RETURN_IF_ERROR(r.Str("state_dir", s.state_dir));
  RETURN_IF_ERROR(r.Uint("vcpus", s.vcpus));
  RETURN_IF_ERROR(r.Uint("memory_mib", s.memory_mib));
  RETURN_IF_ERROR(r.Str("kernel", s.kernel, false));
  RETURN_IF_ERROR(r.Str("initrd", s.initrd, false));
  RETURN_IF_ERROR(r.Str("kernel_cmdline", s.kernel_cmdline, false));
  RETURN_IF_ERROR(r.Str("extra_kernel_params", s.extra_kernel_params, false));
  RETURN_IF_ERROR(r.Str("console_log", s.console_log, false));
  RETURN_IF_ERROR(r.Bool("start_paused", s.start_paused, false));
  RETURN_IF_ERROR(r.Uint("hotplug_slots", s.hotplug_slots, false));
  RETURN_IF_ERROR(r.Str("memory_file", s.memory_file, false));
  RETURN_IF_ERROR(r.Bool("memory_private", s.memory_private, false));
  RETURN_IF_ERROR(r.Bool("incoming", s.incoming, false));
  RETURN_IF_ERROR(r.Bool("vmgenid", s.vmgenid, false));
  RETURN_IF_ERROR(r.Str("agent_token", s.agent_token, false));
  if (!s.agent_token.empty() && !agent_auth::IsWellFormedToken(s.agent_token))
    return r.Error("agent_token", "expected 64 lowercase hex digits");
  RETURN_IF_ERROR(r.StrList("extra_args", s.extra_args));
  std::string accel;
  RETURN_IF_ERROR(r.Str("accelerator", accel, false));
  if (!accel.empty()) {
    s.accelerator = ParseRequestedAccel(accel);
    if (!s.accelerator) return r.Error("accelerator", "expected auto, kvm or tcg");
  }
  return DeviceList(r, "devices", [&](const Reader& dr) -> Status {
    ASSIGN_OR_RETURN(Device d, DeviceFromJson(dr));
    s.devices.push_back(std::move(d));
    return Status::Ok();
  });
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
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", source));
  if (!j.is_object()) return InvalidArgument(fmt::format("{}: expected a JSON object", source));
  Reader r(j, "", source);
  int version = 0;
  RETURN_IF_ERROR(r.Uint("version", version));
  if (version != VmRecord::kFormatVersion)
    return r.Error("version", fmt::format("format {} is not supported (this build reads {})", version, VmRecord::kFormatVersion));
  VmRecord rec;
  RETURN_IF_ERROR(r.Str("hypervisor", rec.hypervisor));
  ASSIGN_OR_RETURN(Reader spec, r.Object("spec"));
  RETURN_IF_ERROR(SpecFromJson(spec, rec.spec));
  std::string accel;
  RETURN_IF_ERROR(r.Str("accelerator", accel));
  if (accel != "kvm" && accel != "tcg") return r.Error("accelerator", "expected kvm or tcg");
  rec.accelerator = accel == "kvm" ? Accelerator::kKvm : Accelerator::kTcg;
  ASSIGN_OR_RETURN(Reader vmm, r.Object("vmm"));
  RETURN_IF_ERROR(vmm.Uint("pid", rec.vmm.pid));
  RETURN_IF_ERROR(vmm.Uint("start_time", rec.vmm.start_time));
  RETURN_IF_ERROR(vmm.Str("boot_id", rec.vmm.boot_id));
  RETURN_IF_ERROR(vmm.Str("binary", rec.vmm_binary));
  RETURN_IF_ERROR(vmm.Str("version", rec.vmm_version, false));
  if (auto uid = vmm.Get("uid", false); uid.ok() && *uid != nullptr) {
    if (!(*uid)->is_number_integer() || (*uid)->get<int64_t>() < -1 || (*uid)->get<int64_t>() > 0xffffffffll)
      return vmm.Error("uid", "expected -1 or a uid");
    rec.vmm_uid = (*uid)->get<int64_t>();
  }
  RETURN_IF_ERROR(r.Str("qmp_socket", rec.qmp_socket));
  RETURN_IF_ERROR(r.Str("vmm_log", rec.vmm_log));
  auto add_hotplugged = [&](const Reader& dr) -> Status {
    ASSIGN_OR_RETURN(Device d, DeviceFromJson(dr));
    HotpluggedDevice h{std::move(d), ""};
    RETURN_IF_ERROR(dr.Str("port", h.port));
    rec.hotplugged.push_back(std::move(h));
    return Status::Ok();
  };
  RETURN_IF_ERROR(DeviceList(r, "hotplugged", add_hotplugged));
  return rec;
}

}  // namespace capsule::hypervisor
