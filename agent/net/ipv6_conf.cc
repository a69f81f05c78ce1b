// See ipv6_conf.h.
#include "agent/net/ipv6_conf.h"

#include <fmt/format.h>

#include "runtime/common/file_util.h"

namespace capsule::agent::net {
namespace {

std::string Knob(const std::string& link) { return "/proc/sys/net/ipv6/conf/" + link + "/disable_ipv6"; }

}  // namespace

Result<std::optional<bool>> Ipv6On(const std::string& link) {
  auto v = ReadFile(Knob(link));
  if (!v.ok() && v.status().code() == Code::kNotFound) return std::optional<bool>();
  if (!v.ok()) return std::move(v).status().WithContext("interface " + link + ": is IPv6 on");
  return std::optional<bool>(v->rfind('0', 0) == 0);
}

Status SetIpv6On(const std::string& link, bool on) {
  return WriteFile(Knob(link), on ? "0" : "1")
      .WithContext(fmt::format("interface {}: IPv6 {}", link, on ? "on" : "off"));
}

}  // namespace capsule::agent::net
