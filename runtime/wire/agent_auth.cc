#include "runtime/wire/agent_auth.h"

#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

#include "runtime/common/line_io.h"
#include "runtime/common/reasons.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent_auth {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kAuthVerb = "AUTH ";
constexpr std::string_view kOk = "OK\n";
constexpr std::string_view kDenied = "DENIED\n";
constexpr size_t kAuthLineLength = kAuthVerb.size() + guest_abi::kAgentTokenHexLength + 1;

constexpr std::string_view kWhat = "agent handshake";

}  // namespace

bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<std::string> NewToken() {
  unsigned char bytes[guest_abi::kAgentTokenHexLength / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("getrandom for an agent token");
    got += static_cast<size_t>(n);
  }
  std::string hex;
  hex.reserve(guest_abi::kAgentTokenHexLength);
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

bool IsWellFormedToken(std::string_view token) {
  if (token.size() != guest_abi::kAgentTokenHexLength) return false;
  for (char c : token)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status Prove(int fd, const std::string& token, milliseconds timeout) {
  if (!IsWellFormedToken(token)) return InvalidArgument("agent handshake: the VM's token is not 64 hex digits");
  const auto deadline = Clock::now() + timeout;
  RETURN_IF_ERROR(line_io::WriteAll(fd, std::string(kAuthVerb) + token + "\n", deadline, kWhat));
  ASSIGN_OR_RETURN(std::string reply, line_io::ReadLine(fd, kDenied.size(), deadline, kWhat));
  if (reply == kOk) return Status::Ok();
  if (reply == kDenied)
    return PermissionDenied("the agent refused this VM's token (AUTH denied)").WithReason(reason::kAgentTokenRefused);
  return Unavailable(fmt::format("agent handshake: unexpected reply ({} bytes) instead of OK", reply.size()));
}

Status Check(int fd, const std::function<bool(std::string_view presented)>& accepts, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ASSIGN_OR_RETURN(std::string line, line_io::ReadLine(fd, kAuthLineLength, deadline, kWhat));
  const bool shaped = line.size() == kAuthLineLength && line.back() == '\n' &&
                      std::string_view(line).substr(0, kAuthVerb.size()) == kAuthVerb;
  const std::string_view token = shaped ? std::string_view(line).substr(kAuthVerb.size(), kAuthLineLength - kAuthVerb.size() - 1)
                                        : std::string_view();
  if (shaped && IsWellFormedToken(token) && accepts(token)) return line_io::WriteAll(fd, kOk, deadline, kWhat);
  (void)line_io::WriteAll(fd, kDenied, deadline, kWhat);
  return PermissionDenied(shaped ? "agent handshake: a wrong token" : "agent handshake: not an AUTH line")
      .WithReason(reason::kAgentTokenRefused);
}

Status Check(int fd, const std::string& expected, milliseconds timeout) {
  return Check(
      fd, [&](std::string_view presented) { return IsWellFormedToken(expected) && SameToken(presented, expected); },
      timeout);
}

}  // namespace capsule::agent_auth
