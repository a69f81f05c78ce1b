// Launch's parent <-> child protocol over a SOCK_SEQPACKET socketpair:
// one fixed-size message per packet, optionally carrying an fd (the pty
// master). The child end is CLOEXEC, so a successful execve shows up in the
// parent as end-of-stream (like runc's exec fifo, without a file).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

enum class SyncType : uint32_t {
  kPid = 1,    // intermediate -> parent: value = container process pid
  kGo,         // parent -> child: pid registered, set up the container
  kConsole,    // child -> parent: carries the pty master fd
  kReady,      // child -> parent: set up, waiting for kStart
  kStart,      // parent -> child: exec the user process now
  kError,      // child -> parent: code + message; the child then exits
};

struct SyncMessage {
  SyncType type = SyncType::kError;
  int32_t value = 0;
  int32_t code = 0;  // capsule::Code for kError
  char text[1024] = {};
  char reason[64] = {};  // Status::reason for kError, NUL-terminated ("" when none)
};

struct SyncPair {
  UniqueFd parent;
  UniqueFd child;
};
Result<SyncPair> MakeSyncPair();

// Sends one message (and `fd` as SCM_RIGHTS when >= 0).
Status SendSync(int sock, SyncType type, int32_t value = 0, int fd = -1);
// Sends a kError carrying `status`.
Status SendSyncError(int sock, const Status& status);

struct Received {
  std::optional<SyncMessage> message;  // nullopt: the peer closed (or exec'ed)
  UniqueFd fd;
};
// Blocks until a message, end-of-stream, or `timeout` (DEADLINE_EXCEEDED).
Result<Received> RecvSync(int sock, std::optional<std::chrono::milliseconds> timeout);

// A kError message as a Status (code, text and reason from the child; a
// reason that is not IsReasonName is dropped).
Status SyncErrorStatus(const SyncMessage& m);
std::string_view SyncTypeName(SyncType type);

}  // namespace capsule::engine
