#include "runtime/wire/port_forward_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include <fmt/format.h>

#include "runtime/common/line_io.h"

namespace capsule::port_forward {
namespace {

constexpr std::string_view kVerb = "FORWARD ";
constexpr std::string_view kOk = "OK";
constexpr std::string_view kErr = "ERR ";

std::string Printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

}  // namespace

std::string Target::ToString() const {
  return family == AF_INET6 ? fmt::format("[{}]:{}", address, port) : fmt::format("{}:{}", address, port);
}

std::string FormatRequest(const Target& target) { return fmt::format("{}{} {}\n", kVerb, target.address, target.port); }

Result<Target> ParseRequest(std::string_view line) {
  if (line.size() > kMaxRequestLine) return InvalidArgument("port-forward request: longer than a request line");
  if (line.substr(0, kVerb.size()) != kVerb) return InvalidArgument("port-forward request: not a FORWARD line");
  line.remove_prefix(kVerb.size());
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return InvalidArgument("port-forward request: no port after the address");
  const std::string address(line.substr(0, space));
  const std::string_view port_text = line.substr(space + 1);
  Target t;
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) != 127)
      return InvalidArgument("port-forward request: " + address + " is not a loopback address");
    t.family = AF_INET;
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (!IN6_IS_ADDR_LOOPBACK(&v6)) return InvalidArgument("port-forward request: " + address + " is not ::1");
    t.family = AF_INET6;
  } else {
    return InvalidArgument("port-forward request: '" + Printable(address, 48) + "' is not an IP address");
  }
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(t.family, t.family == AF_INET ? static_cast<const void*>(&v4) : static_cast<const void*>(&v6), buf,
              sizeof buf);
  t.address = buf;
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string_view::npos)
    return InvalidArgument("port-forward request: the port is not a number");
  const unsigned long port = std::stoul(std::string(port_text));
  if (port == 0 || port > 65535) return InvalidArgument(fmt::format("port-forward request: port {} is out of range", port));
  t.port = static_cast<uint16_t>(port);
  return t;
}

std::string FormatReply(const Status& status) {
  if (status.ok()) return std::string(kOk) + "\n";
  return std::string(kErr) + Printable(status.message(), kMaxReplyLine - kErr.size() - 1) + "\n";
}

Status ParseReply(std::string_view line) {
  if (line == kOk) return Status::Ok();
  if (line.substr(0, kErr.size()) == kErr)
    return Unavailable("the guest: " + Printable(line.substr(kErr.size()), kMaxReplyLine));
  return Unavailable(fmt::format("port-forward: the agent answered {} bytes that are neither OK nor ERR", line.size()));
}

Status Request(int fd, const Target& target, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  constexpr std::string_view kWhat = "port-forward request";
  RETURN_IF_ERROR(line_io::WriteAll(fd, FormatRequest(target), deadline, kWhat));
  ASSIGN_OR_RETURN(std::string reply, line_io::ReadLine(fd, kMaxReplyLine, deadline, kWhat));
  if (reply.empty() || reply.back() != '\n')
    return Unavailable(fmt::format("port-forward: the agent's reply is longer than {} bytes", kMaxReplyLine));
  reply.pop_back();
  return ParseReply(reply);
}

}  // namespace capsule::port_forward
