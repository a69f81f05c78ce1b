// The gRPC implementation of AgentClient, built over one stream that is
// already connected to the agent (after the hybrid-vsock handshake, an
// AF_VSOCK connect, or a unix socket). This header names no gRPC type: only
// grpc_agent_client.cc includes grpcpp.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agentclient {

struct ClientOptions {
  // Deadline of the calls that get no explicit one (see agent_client.h).
  std::chrono::milliseconds default_call_timeout = kDefaultCallTimeout;
  // SignalProcess and TtyWinResize (see ConnectOptions); default: the above.
  std::optional<std::chrono::milliseconds> signal_call_timeout;
  // Called on the caller's thread once a call is registered, i.e. from the
  // moment Close() would cancel it; for tracing (and tests that need to know
  // a call is in flight).
  std::function<void(std::string_view rpc)> on_call_start;
  // Called on the caller's thread when a call has ended, with its duration
  // and whether it succeeded (call_stats.h keeps histograms from these).
  std::function<void(std::string_view rpc, double seconds, bool ok)> on_call_end;
};

// Takes ownership of `stream`; gRPC closes it with the channel.
AgentClientPtr NewGrpcAgentClient(UniqueFd stream, ClientOptions options = {});

}  // namespace capsule::agentclient
