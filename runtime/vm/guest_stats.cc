// See guest_stats.h; the connection is vm_agent.h's.
#include "runtime/vm/guest_stats.h"

#include <cstdlib>
#include <limits>

#include "runtime/agentclient/agent_client.h"
#include "runtime/vm/vm_agent.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kMaxProcFileBytes = 16 * 1024;
constexpr uint64_t kMaxKb = std::numeric_limits<uint64_t>::max() / 1024;

// "Name:   12345 kB" -> 12345, only as a whole line's value.
Result<uint64_t> MeminfoKb(std::string_view text, std::string_view name) {
  const std::string key = std::string(name) + ":";
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.substr(0, key.size()) == key) {
      std::string value(line.substr(key.size()));
      const size_t b = value.find_first_not_of(' ');
      if (b == std::string::npos || value.size() < 4 || value.compare(value.size() - 3, 3, " kB") != 0)
        return InvalidArgument("guest /proc/meminfo: " + std::string(name) + " is not '<n> kB'");
      const std::string digits = value.substr(b, value.size() - 3 - b);
      if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos)
        return InvalidArgument("guest /proc/meminfo: " + std::string(name) + " is not a number");
      const uint64_t kb = std::strtoull(digits.c_str(), nullptr, 10);
      if (kb > kMaxKb) return InvalidArgument("guest /proc/meminfo: " + std::string(name) + " is out of range");
      return kb;
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return InvalidArgument("guest /proc/meminfo has no " + std::string(name));
}

Result<std::string> ReadProcFile(agentclient::AgentClient& agent, const char* path) {
  agentclient::v1::ReadGuestFileRequest req;
  req.set_path(path);
  req.set_max_bytes(kMaxProcFileBytes);
  ASSIGN_OR_RETURN(auto resp, agent.ReadGuestFile(req));
  if (resp.data().size() > kMaxProcFileBytes) return InvalidArgument(std::string("guest sent more ") + path + " than asked");
  return resp.data();
}

}  // namespace

Status ParseMeminfo(std::string_view text, GuestStats& out) {
  if (text.size() > kMaxProcFileBytes) return InvalidArgument("guest /proc/meminfo is too large");
  ASSIGN_OR_RETURN(uint64_t total, MeminfoKb(text, "MemTotal"));
  ASSIGN_OR_RETURN(uint64_t available, MeminfoKb(text, "MemAvailable"));
  if (available > total) return InvalidArgument("guest /proc/meminfo: MemAvailable exceeds MemTotal");
  out.mem_total_bytes = total * 1024;
  out.mem_available_bytes = available * 1024;
  return Status::Ok();
}

Status ParseLoadavg(std::string_view text, GuestStats& out) {
  const std::string first(text.substr(0, std::min<size_t>(text.find(' '), 32)));
  char* end = nullptr;
  const double v = std::strtod(first.c_str(), &end);
  if (first.empty() || end == nullptr || *end != '\0' || !(v >= 0 && v < 1e6))
    return InvalidArgument("guest /proc/loadavg does not start with a load");
  out.load1 = v;
  return Status::Ok();
}

Result<GuestStats> ReadGuestStats(const std::string& state_dir, milliseconds timeout) {
  ASSIGN_OR_RETURN(agentclient::AgentClientPtr agent, ConnectVmAgent(state_dir, timeout));
  GuestStats s;
  ASSIGN_OR_RETURN(std::string meminfo, ReadProcFile(*agent, "/proc/meminfo"));
  RETURN_IF_ERROR(ParseMeminfo(meminfo, s));
  ASSIGN_OR_RETURN(std::string loadavg, ReadProcFile(*agent, "/proc/loadavg"));
  RETURN_IF_ERROR(ParseLoadavg(loadavg, s));
  return s;
}

}  // namespace capsule::vm
