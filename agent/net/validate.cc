// inet_pton-based checks; nothing here touches the network.
#include "agent/net/validate.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace capsule::agent::net {
namespace {

uint32_t MaxPrefix(int family) { return family == AF_INET6 ? 128 : 32; }

Status CheckIp(std::string_view field, int family, const std::string& text) {
  unsigned char buf[16];
  if (family != AF_INET && family != AF_INET6) return InvalidArgument(fmt::format("{}: unknown family", field));
  if (::inet_pton(family, text.c_str(), buf) != 1) {
    return InvalidArgument(fmt::format("{} \"{}\" is not an IPv{} address", field, text, family == AF_INET6 ? 6 : 4));
  }
  return Status::Ok();
}

Status CheckCidr(std::string_view field, int family, const std::string& cidr) {
  size_t slash = cidr.find('/');
  if (slash == std::string::npos) return InvalidArgument(fmt::format("{} \"{}\" is not a CIDR (a/n)", field, cidr));
  RETURN_IF_ERROR(CheckIp(field, family, cidr.substr(0, slash)));
  uint32_t prefix = 0;
  const char* begin = cidr.data() + slash + 1;
  const char* end = cidr.data() + cidr.size();
  auto [p, ec] = std::from_chars(begin, end, prefix);
  if (begin == end || ec != std::errc() || p != end || prefix > MaxPrefix(family))
    return InvalidArgument(fmt::format("{} \"{}\": prefix must be 0..{}", field, cidr, MaxPrefix(family)));
  return Status::Ok();
}

bool ValidName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxInterfaceName && name != "." && name != ".." &&
         std::none_of(name.begin(), name.end(), [](char c) { return c == '/' || c == ':' || std::isspace(c); });
}

}  // namespace

Result<std::string> NormalizeMac(std::string_view field, const std::string& mac) {
  std::string out;
  bool ok = mac.size() == 17;
  for (size_t i = 0; ok && i < mac.size(); ++i) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(mac[i])));
    ok = (i % 3 == 2) ? c == ':' : std::isxdigit(static_cast<unsigned char>(c)) != 0;
    out += c;
  }
  if (!ok) return InvalidArgument(fmt::format("{} \"{}\" is not a MAC address (aa:bb:cc:dd:ee:ff)", field, mac));
  return out;
}

Status ValidateAddress(std::string_view field, const IpAddress& address) {
  RETURN_IF_ERROR(CheckIp(fmt::format("{}.address", field), address.family, address.address));
  if (address.prefix_len > MaxPrefix(address.family))
    return InvalidArgument(fmt::format("{}.prefix_len {} is more than {}", field, address.prefix_len,
                                       MaxPrefix(address.family)));
  return Status::Ok();
}

Status ValidateLinkName(std::string_view field, const std::string& name) {
  if (ValidName(name)) return Status::Ok();
  return InvalidArgument(fmt::format("{} \"{}\" is not a link name (1..{} bytes, no / : or space)", field, name,
                                     kMaxInterfaceName));
}

Status ValidateInterface(const Interface& i) {
  if (i.name.empty() && i.device_hint.empty() && i.hw_addr.empty())
    return InvalidArgument("interface: name, device_hint or hw_addr is required to find the link");
  if (!i.name.empty()) RETURN_IF_ERROR(ValidateLinkName("interface.name", i.name));
  if (!i.device_hint.empty()) RETURN_IF_ERROR(NormalizeMac("interface.device_hint", i.device_hint).status());
  if (!i.hw_addr.empty()) RETURN_IF_ERROR(NormalizeMac("interface.hw_addr", i.hw_addr).status());
  if (i.mtu != 0 && (i.mtu < kMinMtu || i.mtu > kMaxMtu))
    return InvalidArgument(fmt::format("interface.mtu {} is not {}..{} (or 0 to keep it)", i.mtu, kMinMtu, kMaxMtu));
  for (size_t n = 0; n < i.addresses.size(); ++n) {
    RETURN_IF_ERROR(ValidateAddress(fmt::format("interface.addresses[{}]", n), i.addresses[n]));
  }
  return Status::Ok();
}

Status ValidateRoute(std::string_view field, const Route& r) {
  if (r.device.empty()) return InvalidArgument(fmt::format("{}.device is required", field));
  if (!ValidName(r.device)) return InvalidArgument(fmt::format("{}.device \"{}\" is not a link name", field, r.device));
  if (!r.dest.empty()) RETURN_IF_ERROR(CheckCidr(fmt::format("{}.dest", field), r.family, r.dest));
  if (!r.gateway.empty()) RETURN_IF_ERROR(CheckIp(fmt::format("{}.gateway", field), r.family, r.gateway));
  if (!r.source.empty()) RETURN_IF_ERROR(CheckIp(fmt::format("{}.source", field), r.family, r.source));
  if (r.scope > 255) return InvalidArgument(fmt::format("{}.scope {} is not 0..255", field, r.scope));
  if (!r.gateway.empty() && r.scope == kScopeLink)
    return InvalidArgument(fmt::format("{}: a route via gateway {} cannot have scope link", field, r.gateway));
  return Status::Ok();
}

std::string DescribeRoute(const Route& r) {
  std::string out = r.dest.empty() ? "default" : r.dest;
  if (!r.gateway.empty()) out += " via " + r.gateway;
  out += " dev " + r.device;
  if (!r.source.empty()) out += " src " + r.source;
  return out;
}

}  // namespace capsule::agent::net
