// The handshake that opens every connection to a VM's agent when the VM has
// an agent token (guest_abi::kAgentTokenFwCfgName). Before the first gRPC
// byte, on the connected stream:
//   host  -> agent   "AUTH <64 lowercase hex>\n"
//   agent -> host    "OK\n"       (gRPC follows on the same stream)
//                    "DENIED\n"   (and the agent closes it)
// Nothing else is sent until the reply, so neither side can read past the
// handshake into gRPC's bytes. Both sides bound the time and the bytes.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent_auth {

// 32 bytes from getrandom(2), as 64 lowercase hex digits.
Result<std::string> NewToken();

// 64 lowercase hex digits.
bool IsWellFormedToken(std::string_view token);

// Host side: proves `token` on `fd` (blocking or not) within `timeout`.
// PERMISSION_DENIED when the agent says DENIED; UNAVAILABLE when it closes
// first (not listening yet, or gone); DEADLINE_EXCEEDED when it is silent.
Status Prove(int fd, const std::string& token, std::chrono::milliseconds timeout);

// Agent side: reads the AUTH line from `fd` within `timeout` and answers
// it. OK when it names `expected`; PERMISSION_DENIED (after answering
// DENIED) when it names another token or is not an AUTH line at all;
// DEADLINE_EXCEEDED or UNAVAILABLE when the peer is silent or gone.
// Compares in constant time.
Status Check(int fd, const std::string& expected, std::chrono::milliseconds timeout);
// The same, asking `accepts` about the token the peer named (well formed,
// 64 lowercase hex digits); it must compare in constant time.
Status Check(int fd, const std::function<bool(std::string_view presented)>& accepts,
             std::chrono::milliseconds timeout);
// Constant-time comparison of two tokens.
bool SameToken(std::string_view a, std::string_view b);

}  // namespace capsule::agent_auth
