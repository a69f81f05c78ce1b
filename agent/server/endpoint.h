// Where the agent listens: "vsock:PORT" (in the guest, on VMADDR_CID_ANY) or
// "unix:PATH" (on a host, for tests and tools that run the agent as a normal
// process).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::server {

struct Endpoint {
  enum class Kind { kVsock, kUnix };
  Kind kind = Kind::kVsock;
  uint32_t port = 0;  // vsock
  std::string path;   // unix

  std::string ToString() const;
};

// INVALID_ARGUMENT naming the text unless it is vsock:PORT or unix:/abs/path.
Result<Endpoint> ParseEndpoint(std::string_view text);

// A listening, CLOEXEC socket. A stale unix socket file is replaced; the
// file gets mode 0600 (only root may drive the agent).
Result<UniqueFd> Listen(const Endpoint& endpoint);

}  // namespace capsule::agent::server
