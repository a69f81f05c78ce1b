// Handing a claimed VM's agent stream to its claimant. The pool opens one
// stream per ready VM before any claim (agentclient::OpenAgentStream: dialled,
// token proved, the guest's side of the gRPC connection set up), so the
// claimant's first agent call pays for none of that: under TCG the guest's
// set-up of a new connection alone is ~16 ms. The claim API is gRPC, which
// cannot carry a descriptor, so the claimant asks on a unix socket beside
// pool.socket, naming the VM, and gets the stream by SCM_RIGHTS only if it
// is the very process that claimed it: its SO_PEERCRED pid is checked
// against the claim's process identity (pid, start time, boot), so a pid
// reused since gets nothing. A stream nobody takes is closed after its time
// to live; a claimant that gets none dials the agent itself, as before.
//
// Wire, one exchange per connection:
//   claimant -> pool   "TAKE <vm id>\n"
//   pool -> claimant   "OK\n" with the stream attached, or "NO <reason>\n"
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/host/daemon.h"

namespace capsule::pool {

// The hand-over socket of the pool daemon serving `pool_socket` (same
// directory, so it has the same protection).
std::string AgentStreamSocketFor(const std::string& pool_socket);

class AgentStreamHandover {
 public:
  // Listens at `socket_path` (mode 0600; a stale socket is replaced).
  static Result<std::unique_ptr<AgentStreamHandover>> Start(const std::string& socket_path);
  // Stops serving, closes every stream not taken and removes the socket.
  ~AgentStreamHandover();
  AgentStreamHandover(const AgentStreamHandover&) = delete;
  AgentStreamHandover& operator=(const AgentStreamHandover&) = delete;

  // Holds `stream` for the process `claimant` until it takes it or `ttl`
  // passes. False (and the stream closed) when the claimant is unknown
  // (pid <= 0): nobody could prove being it.
  bool Offer(const std::string& vm_id, const ProcessIdentity& claimant, UniqueFd stream,
             std::chrono::milliseconds ttl);
  // Closes the stream held for `vm_id`, if any (its VM stops).
  void Withdraw(const std::string& vm_id);
  size_t held() const;

 private:
  struct Held {
    ProcessIdentity claimant;
    UniqueFd stream;
    std::chrono::steady_clock::time_point expires;
  };
  AgentStreamHandover(std::string path, UniqueFd listener, UniqueFd stop);
  void Serve();
  void Answer(UniqueFd conn);
  // Under mu_: drops the expired ones; returns when the next one expires.
  std::chrono::steady_clock::time_point DropExpiredLocked();

  const std::string path_;
  UniqueFd listener_;
  UniqueFd stop_;  // eventfd: readable once the destructor runs
  mutable std::mutex mu_;
  std::map<std::string, Held> held_;  // guarded by mu_: by VM id
  std::thread thread_;
};

// The claimant's side: the stream held for `vm_id`, for this process.
// NOT_FOUND when the pool holds none for it (or not for us: the reason
// says which); UNAVAILABLE when no pool answers at `socket_path`.
Result<UniqueFd> TakeAgentStream(const std::string& socket_path, const std::string& vm_id,
                                 std::chrono::milliseconds timeout);

}  // namespace capsule::pool
