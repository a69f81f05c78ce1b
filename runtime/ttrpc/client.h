// ttrpc client: many concurrent calls over one connection, matched to their
// responses by stream id (odd, increasing by 2). A call ends with the
// response, the connection closing (UNAVAILABLE), or its timeout
// (DEADLINE_EXCEEDED).
#pragma once

#include <google/protobuf/message_lite.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/ttrpc/context.h"

namespace capsule::ttrpc {

class Client {
 public:
  // Connects to a unix socket ("unix://" prefix accepted), retrying while
  // the path is missing or refusing until `timeout` (0: one attempt).
  static Result<std::unique_ptr<Client>> Dial(const std::string& address,
                                              std::chrono::milliseconds timeout);
  // Takes an already-connected stream socket (O_NONBLOCK is cleared).
  static Result<std::unique_ptr<Client>> FromFd(UniqueFd fd);

  virtual ~Client() = default;

  // Sends one request and waits for its response payload. Thread-safe;
  // calls from many threads share the connection. A request over 4 MiB
  // fails locally with RESOURCE_EXHAUSTED.
  virtual Result<std::string> CallRaw(const std::string& service, const std::string& method,
                                      std::string_view payload, const CallOptions& options) = 0;

  // Typed call: a response that does not parse is INTERNAL.
  template <typename Req, typename Resp>
  Status Call(const std::string& service, const std::string& method, const Req& req, Resp* resp,
              const CallOptions& options = {}) {
    Result<std::string> raw = CallRaw(service, method, req.SerializeAsString(), options);
    if (!raw.ok()) return std::move(raw).status();
    if (!resp->ParseFromString(*raw))
      return Internal("ttrpc: cannot parse response of " + service + "/" + method);
    return Status::Ok();
  }

  // Fails pending and future calls with UNAVAILABLE and closes the socket.
  virtual void Close() = 0;
};

using ClientPtr = std::unique_ptr<Client>;

}  // namespace capsule::ttrpc
