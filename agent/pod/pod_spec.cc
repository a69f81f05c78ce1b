// PodSpec's checks and the resolv.conf it produces.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>

#include "agent/config/settings.h"
#include "agent/pod/pod_spec.h"

namespace capsule::agent::pod {
namespace {

constexpr size_t kMaxDnsEntries = 64;
constexpr size_t kMaxDnsEntryBytes = 1024;
constexpr size_t kMaxStorages = 64;
constexpr size_t kMaxModules = 64;

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool IsIpAddress(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// One resolv.conf line from an entry: "nameserver 10.0.0.10", "search a b",
// "options ndots:5", or a bare address meaning a nameserver.
Result<std::string> DnsLine(const std::string& entry, size_t i) {
  std::string field = fmt::format("dns[{}]", i);
  if (entry.empty() || entry.size() > kMaxDnsEntryBytes) {
    return InvalidArgument(fmt::format("{} must be 1..{} bytes", field, kMaxDnsEntryBytes));
  }
  if (entry.find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
    return InvalidArgument(fmt::format("{} contains a line break or NUL", field));
  }
  if (IsIpAddress(entry)) return "nameserver " + entry;
  size_t sp = entry.find(' ');
  std::string keyword = entry.substr(0, sp);
  std::string rest = sp == std::string::npos ? "" : entry.substr(sp + 1);
  if (keyword == "nameserver") {
    if (!IsIpAddress(rest)) return InvalidArgument(fmt::format("{}: '{}' is not an IP address", field, rest));
    return entry;
  }
  if (keyword == "search" || keyword == "options" || keyword == "domain" || keyword == "sortlist") {
    if (rest.empty()) return InvalidArgument(fmt::format("{}: '{}' needs a value", field, keyword));
    return entry;
  }
  return InvalidArgument(fmt::format(
      "{} '{}' is neither an IP address nor a nameserver/search/options/domain/sortlist line", field, entry));
}

}  // namespace

Status CheckId(std::string_view field, const std::string& id) {
  if (id.empty()) return InvalidArgument(fmt::format("{} is required", field));
  if (id.size() > kMaxIdBytes) return InvalidArgument(fmt::format("{} is longer than {} bytes", field, kMaxIdBytes));
  if (id == "." || id == ".." || !std::all_of(id.begin(), id.end(), IsIdChar))
    return InvalidArgument(fmt::format("{} \"{}\" must be [A-Za-z0-9_.-] and not . or ..", field, id));
  return Status::Ok();
}

Result<std::string> ResolvConfFromDns(const std::vector<std::string>& dns) {
  if (dns.size() > kMaxDnsEntries) {
    return InvalidArgument(fmt::format("dns has {} entries, at most {}", dns.size(), kMaxDnsEntries));
  }
  std::string text;
  for (size_t i = 0; i < dns.size(); ++i) {
    ASSIGN_OR_RETURN(std::string line, DnsLine(dns[i], i));
    text += line + "\n";
  }
  return text;
}

Status ValidatePodSpec(const PodSpec& spec) {
  RETURN_IF_ERROR(CheckId("sandbox_id", spec.id));
  if (!spec.hostname.empty() && !config::IsValidHostname(spec.hostname)) {
    return InvalidArgument(fmt::format("hostname '{}' is not a valid host name", spec.hostname));
  }
  RETURN_IF_ERROR(ResolvConfFromDns(spec.dns).status());
  if (spec.storages.size() > kMaxStorages) {
    return InvalidArgument(fmt::format("{} storages, at most {}", spec.storages.size(), kMaxStorages));
  }
  for (size_t i = 0; i < spec.storages.size(); ++i) {
    RETURN_IF_ERROR(storage::ValidateStorage(spec.storages[i], fmt::format("storages[{}]", i)));
  }
  if (spec.kernel_modules.size() > kMaxModules) {
    return InvalidArgument(fmt::format("{} kernel_modules, at most {}", spec.kernel_modules.size(), kMaxModules));
  }
  for (size_t i = 0; i < spec.kernel_modules.size(); ++i) {
    if (!config::IsValidModuleName(spec.kernel_modules[i])) {
      return InvalidArgument(fmt::format("kernel_modules[{}] '{}' is not a module name", i, spec.kernel_modules[i]));
    }
  }
  return Status::Ok();
}

}  // namespace capsule::agent::pod
