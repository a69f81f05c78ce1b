// sendmsg/recvmsg with SCM_RIGHTS for Launch's sync socket.
#include "agent/engine/sync_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/fd_passing.h"
#include "runtime/common/status_code.h"

namespace capsule::engine {

Result<SyncPair> MakeSyncPair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair (sync)");
  return SyncPair{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

namespace {

Status SendMessage(int sock, const SyncMessage& m, int fd) {
  ssize_t n = SendWithFd(sock, &m, sizeof m, fd);
  if (n < 0) return ErrnoStatus(std::string("send ") + std::string(SyncTypeName(m.type)));
  return Status::Ok();
}

}  // namespace

Status SendSync(int sock, SyncType type, int32_t value, int fd) {
  SyncMessage m;
  m.type = type;
  m.value = value;
  return SendMessage(sock, m, fd);
}

Status SendSyncError(int sock, const Status& status) {
  SyncMessage m;
  m.type = SyncType::kError;
  m.code = static_cast<int32_t>(status.code());
  std::strncpy(m.text, status.message().c_str(), sizeof m.text - 1);
  std::strncpy(m.reason, status.reason().c_str(), sizeof m.reason - 1);
  return SendMessage(sock, m, -1);
}

Result<Received> RecvSync(int sock, std::optional<std::chrono::milliseconds> timeout) {
  if (timeout) {
    pollfd p{sock, POLLIN, 0};
    int r;
    do {
      r = ::poll(&p, 1, static_cast<int>(timeout->count()));
    } while (r < 0 && errno == EINTR);
    if (r < 0) return ErrnoStatus("poll sync socket");
    if (r == 0) return DeadlineExceeded("container process did not answer within " +
                                        std::to_string(timeout->count()) + " ms");
  }
  Received out;
  SyncMessage m;
  const ssize_t n = RecvWithFd(sock, &m, sizeof m, &out.fd);
  if (n < 0) return ErrnoStatus("receive from container process");
  if (n == 0) return out;
  if (static_cast<size_t>(n) != sizeof m) return Internal("short sync message (" + std::to_string(n) + " bytes)");
  m.text[sizeof m.text - 1] = '\0';
  out.message = m;
  return out;
}

Status SyncErrorStatus(const SyncMessage& m) {
  // An error that says OK (0) is the child's bug: INTERNAL.
  Status st(m.code == 0 ? Code::kInternal : CodeFromNumber(m.code),
            std::string(m.text, ::strnlen(m.text, sizeof m.text)));
  const std::string_view reason(m.reason, ::strnlen(m.reason, sizeof m.reason));
  return IsReasonName(reason) ? std::move(st).WithReason(reason) : st;
}

std::string_view SyncTypeName(SyncType type) {
  switch (type) {
    case SyncType::kPid: return "pid";
    case SyncType::kGo: return "go";
    case SyncType::kConsole: return "console";
    case SyncType::kReady: return "ready";
    case SyncType::kStart: return "start";
    case SyncType::kError: return "error";
  }
  return "?";
}

}  // namespace capsule::engine
