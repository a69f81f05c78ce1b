// capsule.* kernel command line keys -> BootSettings, collecting warnings
// instead of failing: PID 1 must come up whatever the host passed.
#include "agent/config/settings.h"

#include <fmt/format.h>

#include <cctype>
#include <functional>
#include <map>

#include "runtime/wire/guest_abi.h"

namespace capsule::agent::config {
namespace {

constexpr std::string_view kPrefix = "capsule.";
constexpr size_t kHostNameMax = 64;    // HOST_NAME_MAX, from limits.h
constexpr size_t kModuleNameMax = 55;  // MODULE_NAME_LEN (64 - sizeof(unsigned long)) - 1

std::optional<bool> ParseBool(std::string_view v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

std::vector<std::string> SplitComma(std::string_view v) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string_view::npos) end = v.size();
    if (end > start) out.emplace_back(v.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

using Setter = std::function<bool(BootSettings&, std::string_view)>;

const std::map<std::string, Setter, std::less<>>& Setters() {
  static const std::map<std::string, Setter, std::less<>> setters{
      {"log",
       [](BootSettings& s, std::string_view v) {
         auto level = log::ParseLevel(v);
         if (level) s.log_level = *level;
         return level.has_value();
       }},
      {"hostname",
       [](BootSettings& s, std::string_view v) {
         if (!IsValidHostname(v)) return false;
         s.hostname = std::string(v);
         return true;
       }},
      {"modules",
       [](BootSettings& s, std::string_view v) {
         auto names = SplitComma(v);
         for (const auto& n : names) {
           if (!IsValidModuleName(n)) return false;
         }
         s.extra_modules = std::move(names);
         return true;
       }},
      {"modules_allow",
       [](BootSettings& s, std::string_view v) {
         auto patterns = SplitComma(v);
         for (const auto& p : patterns) {
           if (!guest_abi::IsValidModulePattern(p)) return false;
         }
         s.allowed_modules = std::move(patterns);
         return true;
       }},
      {"debug_shell",
       [](BootSettings& s, std::string_view v) {
         auto b = ParseBool(v);
         if (b) s.debug_shell = *b;
         return b.has_value();
       }},
      {"cgroups",
       [](BootSettings& s, std::string_view v) {
         auto b = ParseBool(v);
         if (b) s.cgroups = *b;
         return b.has_value();
       }},
      {"vsock",
       [](BootSettings& s, std::string_view v) {
         s.serial_vsock = v == "serial";
         return v == "serial" || v == "device";
       }},
      {"disks",
       [](BootSettings& s, std::string_view v) {
         s.scsi_disks = v == "scsi";
         return v == "scsi";
       }},
      {"fault",
       [](BootSettings& s, std::string_view v) {
         s.fault = std::string(v);
         return true;
       }},
  };
  return setters;
}

}  // namespace

BootSettings SettingsFromCmdline(const std::vector<KernelParam>& params) {
  BootSettings s;
  for (const auto& p : params) {
    if (p.key.rfind(kPrefix, 0) != 0) continue;
    std::string_view name = std::string_view(p.key).substr(kPrefix.size());
    auto it = Setters().find(name);
    if (it == Setters().end()) {
      s.warnings.push_back(fmt::format("unknown kernel option {} ignored", p.key));
      continue;
    }
    // A bare boolean key ("capsule.debug_shell") means true.
    std::string_view value = p.value ? std::string_view(*p.value) : std::string_view("1");
    if (!it->second(s, value)) {
      s.warnings.push_back(fmt::format("bad value '{}' for kernel option {} ignored", value, p.key));
    }
  }
  return s;
}

bool IsValidHostname(std::string_view name) {
  if (name.empty() || name.size() > kHostNameMax) return false;
  size_t label_len = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '.') {
      if (label_len == 0 || name[i - 1] == '-') return false;
      label_len = 0;
      continue;
    }
    bool alnum = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (!alnum && c != '-') return false;
    if (c == '-' && label_len == 0) return false;
    ++label_len;
  }
  return label_len > 0 && name.back() != '-';
}

bool IsValidModuleName(std::string_view name) {
  if (name.empty() || name.size() > kModuleNameMax) return false;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace capsule::agent::config
