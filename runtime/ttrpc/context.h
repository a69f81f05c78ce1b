// What a ttrpc handler learns about the call it serves, and what a client
// may attach to one: metadata (e.g. containerd-namespace-ttrpc), deadline.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace capsule::ttrpc {

// ttrpc Request.metadata: repeated key/value pairs; a key may repeat.
using Metadata = std::vector<std::pair<std::string, std::string>>;

struct CallContext {
  std::string service;
  std::string method;
  Metadata metadata;
  // From Request.timeout_nano, measured from when the request was read.
  std::optional<std::chrono::steady_clock::time_point> deadline;

  // Work the handler leaves for after its response is written, on its
  // thread, in order: what the response must reach the client before (an
  // exit event that would make containerd close the connection the kill's
  // answer is still due on). Outside a server (a handler called directly)
  // it runs at once.
  void AfterReply(std::function<void()> work) const {
    if (after_reply != nullptr) {
      after_reply->push_back(std::move(work));
    } else {
      work();
    }
  }
  std::vector<std::function<void()>>* after_reply = nullptr;  // set by the server

  // First value of `key`, if any.
  std::optional<std::string> Get(const std::string& key) const {
    for (const auto& [k, v] : metadata) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
};

struct CallOptions {
  // Sent as timeout_nano and enforced locally: the call fails with
  // DEADLINE_EXCEEDED when no response came in time.
  std::optional<std::chrono::milliseconds> timeout;
  Metadata metadata;
};

}  // namespace capsule::ttrpc
