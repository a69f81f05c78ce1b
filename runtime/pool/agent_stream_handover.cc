// See agent_stream_handover.h. One thread answers the claimants one at a
// time, each within kAnswerTimeout: the socket is root's alone (0600 in
// pool.socket's 0700 directory), and a claimant asks once, right after its
// claim.
#include "runtime/pool/agent_stream_handover.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/fd_passing.h"
#include "runtime/common/line_io.h"
#include "runtime/common/logging.h"
#include "runtime/common/printable.h"
#include "runtime/common/unix_stream.h"

namespace capsule::pool {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const log::Logger kHandoverLog("pool");

constexpr std::string_view kTake = "TAKE ";
constexpr std::string_view kOk = "OK\n";
constexpr std::string_view kNo = "NO ";
// "TAKE " + a VM id (vm_dir.h: at most 64 bytes) + '\n', with room.
constexpr size_t kMaxRequestLine = 128;
constexpr size_t kMaxReplyLine = 256;
constexpr milliseconds kAnswerTimeout{1000};
constexpr std::string_view kWhat = "agent stream hand-over";

bool SameProcess(const ProcessIdentity& a, const ProcessIdentity& b) {
  return a.pid == b.pid && a.start_time == b.start_time && a.boot_id == b.boot_id;
}

}  // namespace

std::string AgentStreamSocketFor(const std::string& pool_socket) { return pool_socket + ".streams"; }

Result<std::unique_ptr<AgentStreamHandover>> AgentStreamHandover::Start(const std::string& socket_path) {
  UnixListenOptions lo;
  lo.mode = 0600;
  lo.existing = UnixListenOptions::Existing::kReplaceStale;
  lo.nonblocking = true;
  ASSIGN_OR_RETURN(UniqueFd listener, ListenUnix(socket_path, lo));
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return ErrnoStatus("eventfd for the agent stream hand-over");
  std::unique_ptr<AgentStreamHandover> h(
      new AgentStreamHandover(socket_path, std::move(listener), std::move(stop)));
  h->thread_ = std::thread([raw = h.get()] { raw->Serve(); });
  return h;
}

AgentStreamHandover::AgentStreamHandover(std::string path, UniqueFd listener, UniqueFd stop)
    : path_(std::move(path)), listener_(std::move(listener)), stop_(std::move(stop)) {}

AgentStreamHandover::~AgentStreamHandover() {
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  listener_.reset();
  ::unlink(path_.c_str());
}

bool AgentStreamHandover::Offer(const std::string& vm_id, const ProcessIdentity& claimant, UniqueFd stream,
                                milliseconds ttl) {
  if (claimant.pid <= 0 || !stream) return false;
  std::lock_guard lock(mu_);
  held_[vm_id] = Held{claimant, std::move(stream), Clock::now() + ttl};
  return true;
}

void AgentStreamHandover::Withdraw(const std::string& vm_id) {
  std::lock_guard lock(mu_);
  held_.erase(vm_id);
}

size_t AgentStreamHandover::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

Clock::time_point AgentStreamHandover::DropExpiredLocked() {
  const auto now = Clock::now();
  auto next = Clock::time_point::max();
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.expires <= now) {
      kHandoverLog.Info("the agent stream of {} was not taken by pid {} in time: closed", it->first,
                        it->second.claimant.pid);
      it = held_.erase(it);
    } else {
      next = std::min(next, it->second.expires);
      ++it;
    }
  }
  return next;
}

void AgentStreamHandover::Serve() {
  for (;;) {
    Clock::time_point next;
    {
      std::lock_guard lock(mu_);
      next = DropExpiredLocked();
    }
    // At most a second between sweeps: an Offer does not wake this poll,
    // and a stream's time to live is the claim grace, tens of seconds.
    const auto cap = Clock::now() + milliseconds(1000);
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    const int r = ::poll(fds, 2, line_io::MillisLeft(std::min(next, cap)));
    if (r < 0 && errno != EINTR) {
      kHandoverLog.Error("{}: poll: {}", kWhat, ErrnoStatus("poll").message());
      return;
    }
    if (r > 0 && fds[1].revents != 0) return;
    if (r <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (conn) Answer(std::move(conn));
  }
}

void AgentStreamHandover::Answer(UniqueFd conn) {
  const auto deadline = Clock::now() + kAnswerTimeout;
  auto refuse = [&](const std::string& why) {
    (void)line_io::WriteAll(conn.get(), std::string(kNo) + why + "\n", deadline, kWhat);
  };
  auto line = line_io::ReadLine(conn.get(), kMaxRequestLine, deadline, kWhat);
  if (!line.ok()) return;
  if (line->size() <= kTake.size() + 1 || line->back() != '\n' || !line->starts_with(kTake)) {
    refuse("not a TAKE line");
    return;
  }
  const std::string vm_id = line->substr(kTake.size(), line->size() - kTake.size() - 1);
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    refuse("the pool could not tell who asks");
    return;
  }
  UniqueFd stream;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(vm_id);
    if (it == held_.end()) {
      refuse("no agent stream held for " + Printable(vm_id, 80));
      return;
    }
    // The pid names the claimant only while it is the same process.
    auto asker = IdentifyProcess(cred.pid);
    if (!asker.ok() || !SameProcess(*asker, it->second.claimant)) {
      kHandoverLog.Warn("pid {} asked for the agent stream of {}, which pid {} claimed: refused", cred.pid, vm_id,
                        it->second.claimant.pid);
      refuse(fmt::format("the agent stream of {} is for the process that claimed it, pid {}", vm_id,
                         it->second.claimant.pid));
      return;
    }
    stream = std::move(it->second.stream);
    held_.erase(it);
  }
  if (SendWithFd(conn.get(), kOk.data(), kOk.size(), stream.get()) != static_cast<ssize_t>(kOk.size()))
    kHandoverLog.Warn("{}: sending the agent stream of {} to pid {}: {}", kWhat, vm_id, cred.pid,
                      ErrnoStatus("sendmsg").message());
}

Result<UniqueFd> TakeAgentStream(const std::string& socket_path, const std::string& vm_id, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto conn = ConnectUnix(socket_path);
  if (!conn.ok()) return Unavailable(fmt::format("{} at {}: {}", kWhat, socket_path, conn.status().message()));
  RETURN_IF_ERROR(line_io::WriteAll(conn->get(), std::string(kTake) + vm_id + "\n", deadline, kWhat));
  std::string reply;
  UniqueFd stream;
  while (reply.find('\n') == std::string::npos) {
    if (reply.size() >= kMaxReplyLine) return Internal(fmt::format("{}: reply line too long", kWhat));
    RETURN_IF_ERROR(line_io::WaitFor(conn->get(), POLLIN, deadline, kWhat, "reply"));
    char buf[kMaxReplyLine];
    UniqueFd got;
    const ssize_t n = RecvWithFd(conn->get(), buf, kMaxReplyLine - reply.size(), &got);
    if (n < 0) return ErrnoStatus(std::string(kWhat) + ": receive the reply");
    if (n == 0) return Unavailable(fmt::format("{}: the pool closed the connection without a reply", kWhat));
    if (got) stream = std::move(got);
    reply.append(buf, static_cast<size_t>(n));
  }
  reply.resize(reply.find('\n') + 1);
  if (reply == kOk) {
    if (!stream) return Internal(fmt::format("{}: OK came without a stream", kWhat));
    return stream;
  }
  if (reply.starts_with(kNo)) {
    const std::string why = reply.substr(kNo.size(), reply.size() - kNo.size() - 1);
    return NotFound(fmt::format("{}: {}", kWhat, Printable(why, 200)));
  }
  return Internal(fmt::format("{}: unexpected reply '{}'", kWhat, Printable(reply, 80)));
}

}  // namespace capsule::pool
