// YAML -> Config with strict validation: unknown keys, wrong types, bad enum
// values and out-of-range numbers are errors naming file:line:col and the key.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "runtime/common/file_util.h"
#include "runtime/config/config.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::config {
namespace {

// Bounds guest.modules_allow, which goes on the guest kernel's command line.
constexpr size_t kMaxModulePatterns = 32;

class Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  Status Where(const YAML::Node& node, const std::string& key, const std::string& what) const {
    const YAML::Mark m = node.Mark();
    std::string loc = source_;
    if (!m.is_null()) loc += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    return InvalidArgument(loc + ": key '" + key + "' " + what);
  }

  // No control characters: no key takes one, and YAML itself does not keep
  // them (a trailing carriage return is lost when the value is written back).
  Status String(const YAML::Node& n, const std::string& key, std::string* out) const {
    if (!n.IsScalar()) return Where(n, key, "must be a string");
    const std::string& s = n.Scalar();
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x20 || c == 0x7f)
        return Where(n, key, fmt::format("must not contain control characters (byte 0x{:02x} at offset {})", c, i));
    }
    *out = s;
    return Status::Ok();
  }

  Status Path(const YAML::Node& n, const std::string& key, std::string* out) const {
    RETURN_IF_ERROR(String(n, key, out));
    if (out->empty() || (*out)[0] != '/') return Where(n, key, "must be an absolute path, got '" + *out + "'");
    return Status::Ok();
  }

  // "" (unset) or an absolute path.
  Status OptionalPath(const YAML::Node& n, const std::string& key, std::string* out) const {
    RETURN_IF_ERROR(String(n, key, out));
    if (!out->empty() && (*out)[0] != '/') return Where(n, key, "must be empty or an absolute path, got '" + *out + "'");
    return Status::Ok();
  }

  Status Bool(const YAML::Node& n, const std::string& key, bool* out) const {
    if (!n.IsScalar()) return Where(n, key, "must be true or false");
    const std::string& s = n.Scalar();
    if (s == "true") *out = true;
    else if (s == "false") *out = false;
    else return Where(n, key, "must be true or false, got '" + s + "'");
    return Status::Ok();
  }

  Status Uint(const YAML::Node& n, const std::string& key, uint32_t min, uint32_t max,
              uint32_t* out) const {
    if (!n.IsScalar()) return Where(n, key, "must be an integer");
    const std::string& s = n.Scalar();
    uint64_t v = 0;
    bool digits = !s.empty() && s.size() <= 10;
    for (char c : s) digits = digits && c >= '0' && c <= '9';
    if (!digits) return Where(n, key, "must be an integer, got '" + s + "'");
    v = std::stoull(s);
    if (v < min || v > max)
      return Where(n, key, "must be between " + std::to_string(min) + " and " +
                               std::to_string(max) + ", got " + s);
    *out = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  // A sequence of module names or globs (guest_abi::IsValidModulePattern).
  Status ModulePatterns(const YAML::Node& n, const std::string& key, std::vector<std::string>* out) const {
    if (n.IsNull()) {
      out->clear();
      return Status::Ok();
    }
    if (!n.IsSequence()) return Where(n, key, "must be a list of module names or patterns");
    if (n.size() > kMaxModulePatterns)
      return Where(n, key, fmt::format("lists {} patterns, more than {}", n.size(), kMaxModulePatterns));
    std::vector<std::string> patterns;
    for (const auto& item : n) {
      std::string p;
      RETURN_IF_ERROR(String(item, key, &p));
      if (!guest_abi::IsValidModulePattern(p))
        return Where(item, key, fmt::format("'{}' is not a module name or pattern (1 to {} of A-Z a-z 0-9 _ - * ?)", p,
                                            guest_abi::kModulePatternMax));
      patterns.push_back(std::move(p));
    }
    *out = std::move(patterns);
    return Status::Ok();
  }

  template <typename E>
  Status Enum(const YAML::Node& n, const std::string& key,
              const std::vector<std::pair<std::string, E>>& values, E* out) const {
    if (!n.IsScalar()) return Where(n, key, "must be a string");
    std::string allowed;
    for (const auto& [name, value] : values) {
      if (n.Scalar() == name) {
        *out = value;
        return Status::Ok();
      }
      allowed += (allowed.empty() ? "" : "|") + name;
    }
    return Where(n, key, "must be one of " + allowed + ", got '" + n.Scalar() + "'");
  }

  using FieldFn = std::function<Status(const YAML::Node&, const std::string&)>;

  // Walks a mapping section, dispatching known keys and rejecting the rest.
  Status Section(const YAML::Node& node, const std::string& prefix,
                 const std::map<std::string, FieldFn>& fields) const {
    if (node.IsNull()) return Status::Ok();
    if (!node.IsMap()) return Where(node, prefix, "must be a mapping");
    for (const auto& kv : node) {
      const std::string name = kv.first.Scalar();
      const std::string key = prefix.empty() ? name : prefix + "." + name;
      auto it = fields.find(name);
      if (it == fields.end()) return Where(kv.first, key, "is unknown");
      RETURN_IF_ERROR(it->second(kv.second, key));
    }
    return Status::Ok();
  }

  Status Load(const YAML::Node& root, Config* c) const {
    auto section = [this](std::map<std::string, FieldFn> fields) -> FieldFn {
      return [this, fields = std::move(fields)](const YAML::Node& n, const std::string& key) {
        return Section(n, key, fields);
      };
    };
    auto& h = c->hypervisor;
    auto& g = c->guest;
    auto& r = c->runtime;
    const std::map<std::string, FieldFn> top = {
        {"hypervisor", section({
             {"path", [&](auto& n, auto& k) { return Path(n, k, &h.path); }},
             {"accelerator", [&](auto& n, auto& k) {
                return Enum<Accelerator>(n, k, {{"auto", Accelerator::kAuto}, {"kvm", Accelerator::kKvm},
                                                {"tcg", Accelerator::kTcg}}, &h.accelerator);
              }},
             {"kernel_params", [&](auto& n, auto& k) { return String(n, k, &h.kernel_params); }},
             {"tcg_tb_size_mib", [&](auto& n, auto& k) { return Uint(n, k, 0, 4096, &h.tcg_tb_size_mib); }},
             {"seccomp_sandbox", [&](auto& n, auto& k) { return Bool(n, k, &h.seccomp_sandbox); }},
             {"firmware", [&](auto& n, auto& k) { return OptionalPath(n, k, &h.firmware); }},
             {"vmm_uid_base", [&](auto& n, auto& k) { return Uint(n, k, 0, 0x7fffffff, &h.vmm_uid_base); }},
             {"vmm_uid_count", [&](auto& n, auto& k) { return Uint(n, k, 1, 1u << 24, &h.vmm_uid_count); }},
         })},
        {"guest", section({
             {"kernel", [&](auto& n, auto& k) { return Path(n, k, &g.kernel); }},
             {"initrd", [&](auto& n, auto& k) { return Path(n, k, &g.initrd); }},
             {"default_vcpus", [&](auto& n, auto& k) { return Uint(n, k, 1, 256, &g.default_vcpus); }},
             {"default_memory_mib", [&](auto& n, auto& k) { return Uint(n, k, 64, 1u << 20, &g.default_memory_mib); }},
             {"max_vcpus", [&](auto& n, auto& k) { return Uint(n, k, 1, 256, &g.max_vcpus); }},
             {"max_memory_mib", [&](auto& n, auto& k) { return Uint(n, k, 64, 1u << 20, &g.max_memory_mib); }},
             {"boot_nic", [&](auto& n, auto& k) { return Bool(n, k, &g.boot_nic); }},
             {"modules", [&](auto& n, auto& k) { return OptionalPath(n, k, &g.modules); }},
             {"modules_allow", [&](auto& n, auto& k) { return ModulePatterns(n, k, &g.modules_allow); }},
             {"device_set", [&](auto& n, auto& k) {
                return Enum<DeviceSet>(n, k, {{"virtio-fs", DeviceSet::kVirtioFs}, {"dense", DeviceSet::kDense}},
                                       &g.device_set);
              }},
         })},
        {"vsock", section({
             {"backend", [&](auto& n, auto& k) {
                return Enum<VsockBackendKind>(n, k, {{"auto", VsockBackendKind::kAuto},
                                                     {"vhost", VsockBackendKind::kVhost},
                                                     {"vhost-user", VsockBackendKind::kVhostUser},
                                                     {"serial", VsockBackendKind::kSerial}},
                                              &c->vsock.backend);
              }},
         })},
        {"virtiofs", section({
             {"daemon", [&](auto& n, auto& k) { return Path(n, k, &c->virtiofs.daemon); }},
             {"cache", [&](auto& n, auto& k) {
                return Enum<std::string>(n, k, {{"none", "none"}, {"auto", "auto"}, {"always", "always"}},
                                         &c->virtiofs.cache);
              }},
             {"thread_pool_size",
              [&](auto& n, auto& k) { return Uint(n, k, 0, 1024, &c->virtiofs.thread_pool_size); }},
         })},
        {"pool", section({
             {"size", [&](auto& n, auto& k) { return Uint(n, k, 0, 1024, &c->pool.size); }},
             {"socket", [&](auto& n, auto& k) { return Path(n, k, &c->pool.socket); }},
             {"max_parallel_boots", [&](auto& n, auto& k) { return Uint(n, k, 1, 64, &c->pool.max_parallel_boots); }},
             {"claim_timeout_ms", [&](auto& n, auto& k) { return Uint(n, k, 1, 60000, &c->pool.claim_timeout_ms); }},
             {"claim_wait_ms", [&](auto& n, auto& k) { return Uint(n, k, 0, 60000, &c->pool.claim_wait_ms); }},
             {"refill_holdback_ms",
              [&](auto& n, auto& k) { return Uint(n, k, 0, 60000, &c->pool.refill_holdback_ms); }},
             {"cgroup", [&](auto& n, auto& k) { return OptionalPath(n, k, &c->pool.cgroup); }},
             {"shape_expiry_s", [&](auto& n, auto& k) { return Uint(n, k, 1, 7 * 24 * 3600, &c->pool.shape_expiry_s); }},
             {"max_idle", [&](auto& n, auto& k) { return Uint(n, k, 0, 1024, &c->pool.max_idle); }},
             {"refill", [&](auto& n, auto& k) {
                return Enum<std::string>(n, k, {{"template", "template"}, {"boot", "boot"}}, &c->pool.refill);
              }},
         })},
        {"runtime", section({
             {"state_dir", [&](auto& n, auto& k) { return Path(n, k, &r.state_dir); }},
             {"log_level", [&](auto& n, auto& k) {
                return Enum<log::Level>(n, k, {{"trace", log::Level::kTrace}, {"debug", log::Level::kDebug},
                                               {"info", log::Level::kInfo}, {"warn", log::Level::kWarn},
                                               {"error", log::Level::kError}}, &r.log_level);
              }},
             {"boot_timeout_ms", [&](auto& n, auto& k) { return Uint(n, k, 100, 3600000, &r.boot_timeout_ms); }},
             {"agent_timeout_ms", [&](auto& n, auto& k) { return Uint(n, k, 500, 3600000, &r.agent_timeout_ms); }},
             {"image_cache_dir", [&](auto& n, auto& k) { return Path(n, k, &r.image_cache_dir); }},
             {"image_cache_max_mib",
              [&](auto& n, auto& k) { return Uint(n, k, 0, 16u << 20, &r.image_cache_max_mib); }},
         })},
    };
    RETURN_IF_ERROR(Section(root, "", top));
    if (g.default_vcpus > g.max_vcpus)
      return InvalidArgument(source_ + ": key 'guest.default_vcpus' (" + std::to_string(g.default_vcpus) +
                             ") exceeds 'guest.max_vcpus' (" + std::to_string(g.max_vcpus) + ")");
    if (g.default_memory_mib > g.max_memory_mib)
      return InvalidArgument(source_ + ": key 'guest.default_memory_mib' (" +
                             std::to_string(g.default_memory_mib) + ") exceeds 'guest.max_memory_mib' (" +
                             std::to_string(g.max_memory_mib) + ")");
    if (h.vmm_uid_base != 0 && (h.vmm_uid_base < 1000 || uint64_t{h.vmm_uid_base} + h.vmm_uid_count > 0x80000000ull))
      return InvalidArgument(source_ + ": keys 'hypervisor.vmm_uid_base' (" + std::to_string(h.vmm_uid_base) +
                             ") and 'hypervisor.vmm_uid_count' (" + std::to_string(h.vmm_uid_count) +
                             ") must give a range of uids from 1000 up that ends below 2^31 (0 turns it off)");
    if (g.device_set == DeviceSet::kDense) {
      // Private guest RAM rules out vhost-user: its back end would map the
      // template's pages and never see the guest's writes.
      if (c->vsock.backend == VsockBackendKind::kVhostUser)
        return InvalidArgument(source_ + ": key 'vsock.backend' (vhost-user) cannot serve 'guest.device_set: dense': "
                               "a vhost-user back end needs the guest's RAM shared; use serial or vhost");
      if (c->vsock.backend == VsockBackendKind::kAuto) c->vsock.backend = VsockBackendKind::kSerial;
    }
    if (c->pool.claim_wait_ms >= c->pool.claim_timeout_ms)
      return InvalidArgument(source_ + ": key 'pool.claim_wait_ms' (" + std::to_string(c->pool.claim_wait_ms) +
                             ") must be below 'pool.claim_timeout_ms' (" + std::to_string(c->pool.claim_timeout_ms) +
                             "): the shim gives up on a claim after that");
    return Status::Ok();
  }

 private:
  std::string source_;
};

}  // namespace

Result<Config> LoadString(const std::string& yaml, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
  Config c;
  c.source = source_name;
  if (!root.IsNull() && !root.IsMap()) return InvalidArgument(source_name + ": top level must be a mapping");
  try {
    RETURN_IF_ERROR(Loader(source_name).Load(root, &c));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ": " + e.msg);
  }
  return c;
}

Result<Config> LoadFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return std::move(text).status().WithContext("load config");
  return LoadString(*text, path);
}

std::string_view AcceleratorName(Accelerator a) {
  switch (a) {
    case Accelerator::kAuto: return "auto";
    case Accelerator::kKvm: return "kvm";
    case Accelerator::kTcg: return "tcg";
  }
  return "auto";
}

std::string_view VsockBackendName(VsockBackendKind v) {
  switch (v) {
    case VsockBackendKind::kAuto: return "auto";
    case VsockBackendKind::kVhost: return "vhost";
    case VsockBackendKind::kVhostUser: return "vhost-user";
    case VsockBackendKind::kSerial: return "serial";
  }
  return "auto";
}

std::string_view DeviceSetName(DeviceSet d) {
  switch (d) {
    case DeviceSet::kVirtioFs: return "virtio-fs";
    case DeviceSet::kDense: return "dense";
  }
  return "virtio-fs";
}

std::string ToYaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "hypervisor" << YAML::Value << YAML::BeginMap
      << YAML::Key << "path" << YAML::Value << c.hypervisor.path
      << YAML::Key << "accelerator" << YAML::Value << std::string(AcceleratorName(c.hypervisor.accelerator))
      << YAML::Key << "kernel_params" << YAML::Value << c.hypervisor.kernel_params
      << YAML::Key << "tcg_tb_size_mib" << YAML::Value << c.hypervisor.tcg_tb_size_mib
      << YAML::Key << "seccomp_sandbox" << YAML::Value << c.hypervisor.seccomp_sandbox
      << YAML::Key << "firmware" << YAML::Value << c.hypervisor.firmware
      << YAML::Key << "vmm_uid_base" << YAML::Value << c.hypervisor.vmm_uid_base
      << YAML::Key << "vmm_uid_count" << YAML::Value << c.hypervisor.vmm_uid_count
      << YAML::EndMap;
  out << YAML::Key << "guest" << YAML::Value << YAML::BeginMap
      << YAML::Key << "kernel" << YAML::Value << c.guest.kernel
      << YAML::Key << "initrd" << YAML::Value << c.guest.initrd
      << YAML::Key << "default_vcpus" << YAML::Value << c.guest.default_vcpus
      << YAML::Key << "default_memory_mib" << YAML::Value << c.guest.default_memory_mib
      << YAML::Key << "max_vcpus" << YAML::Value << c.guest.max_vcpus
      << YAML::Key << "max_memory_mib" << YAML::Value << c.guest.max_memory_mib
      << YAML::Key << "boot_nic" << YAML::Value << c.guest.boot_nic
      << YAML::Key << "modules" << YAML::Value << c.guest.modules
      << YAML::Key << "modules_allow" << YAML::Value << YAML::Flow << c.guest.modules_allow
      << YAML::Key << "device_set" << YAML::Value << std::string(DeviceSetName(c.guest.device_set))
      << YAML::EndMap;
  out << YAML::Key << "vsock" << YAML::Value << YAML::BeginMap
      << YAML::Key << "backend" << YAML::Value << std::string(VsockBackendName(c.vsock.backend))
      << YAML::EndMap;
  out << YAML::Key << "virtiofs" << YAML::Value << YAML::BeginMap
      << YAML::Key << "daemon" << YAML::Value << c.virtiofs.daemon
      << YAML::Key << "cache" << YAML::Value << c.virtiofs.cache
      << YAML::Key << "thread_pool_size" << YAML::Value << c.virtiofs.thread_pool_size
      << YAML::EndMap;
  out << YAML::Key << "pool" << YAML::Value << YAML::BeginMap
      << YAML::Key << "size" << YAML::Value << c.pool.size
      << YAML::Key << "socket" << YAML::Value << c.pool.socket
      << YAML::Key << "max_parallel_boots" << YAML::Value << c.pool.max_parallel_boots
      << YAML::Key << "claim_timeout_ms" << YAML::Value << c.pool.claim_timeout_ms
      << YAML::Key << "claim_wait_ms" << YAML::Value << c.pool.claim_wait_ms
      << YAML::Key << "refill_holdback_ms" << YAML::Value << c.pool.refill_holdback_ms
      << YAML::Key << "cgroup" << YAML::Value << c.pool.cgroup
      << YAML::Key << "refill" << YAML::Value << c.pool.refill
      << YAML::Key << "shape_expiry_s" << YAML::Value << c.pool.shape_expiry_s
      << YAML::Key << "max_idle" << YAML::Value << c.pool.max_idle
      << YAML::EndMap;
  out << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap
      << YAML::Key << "state_dir" << YAML::Value << c.runtime.state_dir
      << YAML::Key << "log_level" << YAML::Value << std::string(log::LevelName(c.runtime.log_level))
      << YAML::Key << "boot_timeout_ms" << YAML::Value << c.runtime.boot_timeout_ms
      << YAML::Key << "agent_timeout_ms" << YAML::Value << c.runtime.agent_timeout_ms
      << YAML::Key << "image_cache_dir" << YAML::Value << c.runtime.image_cache_dir
      << YAML::Key << "image_cache_max_mib" << YAML::Value << c.runtime.image_cache_max_mib
      << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace capsule::config
