// Mode 0 (first byte even): the input is what a peer sends the agent before
// gRPC; Check must admit exactly "AUTH <the token>\n" and answer OK or
// DENIED. Mode 1 (odd): the input is the agent's reply; Prove must succeed
// only on "OK\n", be PERMISSION_DENIED only on "DENIED\n", and leave every
// byte after the reply line in the socket (it is gRPC's).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/common/unique_fd.h"
#include "runtime/wire/agent_auth.h"
#include "tests/fuzz/fuzz_io.h"

namespace {

using capsule::Code;
using capsule::UniqueFd;
using capsule::fuzz::DrainNow;

const std::string kToken(64, 'c');

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  const bool agent_side = (data[0] & 1) == 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  UniqueFd us(fds[0]), them(fds[1]);
  if (!input.empty() && ::send(us.get(), input.data(), input.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(input.size()))
    return 0;
  ::shutdown(us.get(), SHUT_WR);  // the peer says nothing more: no wait can last
  if (agent_side) {
    capsule::Status st = capsule::agent_auth::Check(them.get(), kToken, std::chrono::milliseconds(50));
    const std::string good = "AUTH " + kToken + "\n";
    Check(st.ok() == (input.compare(0, good.size(), good) == 0));
    const std::string reply = DrainNow(us.get());
    if (st.ok()) Check(reply == "OK\n");
    if (st.code() == Code::kPermissionDenied) Check(reply == "DENIED\n");
  } else {
    capsule::Status st = capsule::agent_auth::Prove(them.get(), kToken, std::chrono::milliseconds(50));
    const bool ok_line = input.rfind("OK\n", 0) == 0;
    const bool denied_line = input.rfind("DENIED\n", 0) == 0;
    Check(st.ok() == ok_line);
    Check((st.code() == Code::kPermissionDenied) == denied_line);
    if (st.ok()) Check(DrainNow(them.get()) == input.substr(3));
    Check(DrainNow(us.get()) == "AUTH " + kToken + "\n");
  }
  return 0;
}
