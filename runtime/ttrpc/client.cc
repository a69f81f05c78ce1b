// ClientImpl: callers write their request frames themselves under a timed
// write lock (so stream ids reach the wire in increasing order, as the
// server requires) and wait on a future; one reader thread completes the
// futures by stream id. Losing the connection fails every pending call.
#include "runtime/ttrpc/client.h"

#include <sys/socket.h>

#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unix_stream.h"
#include "runtime/ttrpc/frame.h"
#include "runtime/ttrpc/socket_io.h"
#include "runtime/ttrpc/status_proto.h"
#include "runtime/ttrpc/unix_socket.h"
#include "ttrpc/request.pb.h"

namespace capsule::ttrpc {
namespace {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;

const log::Logger kClientLog("ttrpc");

constexpr size_t kReadChunkBytes = 64 * 1024;
// Client stream ids are odd and start at 1 (ttrpc client.go).
constexpr uint64_t kFirstStreamId = 1;
constexpr uint64_t kMaxStreamId = 0xffffffffu;

class ClientImpl final : public Client {
 public:
  ClientImpl(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~ClientImpl() override { Close(); }

  Result<std::string> CallRaw(const std::string& service, const std::string& method,
                              std::string_view payload, const CallOptions& options) override;
  void Close() override;

 private:
  using Promise = std::promise<Result<std::string>>;

  Result<std::string> BuildFrame(const std::string& service, const std::string& method,
                                 std::string_view payload, const CallOptions& options) const;
  Status Send(std::string& frame, Deadline deadline, const std::string& what,
              uint32_t* stream_id, std::future<Result<std::string>>* reply);
  Result<std::string> Await(uint32_t stream_id, std::future<Result<std::string>> reply,
                            Deadline deadline, const std::string& what);
  void ReadLoop();
  void Complete(uint32_t stream_id, Result<std::string> result);
  void FailAll(const Status& status);
  static Result<std::string> ParseResponse(const std::string& bytes);

  UniqueFd fd_;
  const std::string peer_;
  std::thread reader_;

  std::timed_mutex write_mu_;  // one frame on the wire at a time

  std::mutex mu_;
  uint64_t next_stream_id_ = kFirstStreamId;  // guarded by mu_
  std::map<uint32_t, Promise> pending_;       // guarded by mu_
  std::optional<Status> closed_;              // guarded by mu_; set once

  std::mutex join_mu_;  // serialises joining reader_ between Close() callers
};

Result<std::string> ClientImpl::BuildFrame(const std::string& service, const std::string& method,
                                           std::string_view payload,
                                           const CallOptions& options) const {
  ::ttrpc::Request req;
  req.set_service(service);
  req.set_method(method);
  req.set_payload(std::string(payload));
  if (options.timeout) {
    req.set_timeout_nano(std::chrono::nanoseconds(*options.timeout).count());
  }
  for (const auto& [k, v] : options.metadata) {
    ::ttrpc::KeyValue* kv = req.add_metadata();
    kv->set_key(k);
    kv->set_value(v);
  }
  const size_t size = req.ByteSizeLong();
  if (size > kMaxPayloadBytes) {
    return ResourceExhausted("ttrpc: request " + service + "/" + method + " is " +
                             std::to_string(size) + " bytes, over the limit of " +
                             std::to_string(kMaxPayloadBytes));
  }
  // Stream id 0 for now; Send() patches it in under the write lock.
  return EncodeFrame(0, FrameType::kRequest, req);
}

Result<std::string> ClientImpl::CallRaw(const std::string& service, const std::string& method,
                                        std::string_view payload, const CallOptions& options) {
  const std::string what = service + "/" + method;
  Deadline deadline;
  if (options.timeout) deadline = Clock::now() + *options.timeout;
  ASSIGN_OR_RETURN(std::string frame, BuildFrame(service, method, payload, options));
  uint32_t stream_id = 0;
  std::future<Result<std::string>> reply;
  RETURN_IF_ERROR(Send(frame, deadline, what, &stream_id, &reply));
  return Await(stream_id, std::move(reply), deadline, what);
}

Status ClientImpl::Send(std::string& frame, Deadline deadline, const std::string& what,
                        uint32_t* stream_id, std::future<Result<std::string>>* reply) {
  std::unique_lock write_lock(write_mu_, std::defer_lock);
  if (!deadline) {
    write_lock.lock();
  } else if (!write_lock.try_lock_until(*deadline)) {
    return DeadlineExceeded("ttrpc: " + what + ": deadline passed waiting to send");
  }
  {
    std::lock_guard lock(mu_);
    if (closed_) return closed_->WithContext(what);
    if (next_stream_id_ > kMaxStreamId) {
      return ResourceExhausted("ttrpc: " + what + ": stream ids exhausted on this connection");
    }
    *stream_id = static_cast<uint32_t>(next_stream_id_);
    next_stream_id_ += 2;
    Promise& p = pending_[*stream_id];
    *reply = p.get_future();
  }
  FrameHeader h = DecodeFrameHeader(frame.data());
  h.stream_id = *stream_id;
  EncodeFrameHeader(h, frame.data());
  size_t sent = 0;
  Status st = SendAllBefore(fd_.get(), frame, deadline, &sent);
  if (st.ok()) return st;
  {
    std::lock_guard lock(mu_);
    pending_.erase(*stream_id);
  }
  if (sent > 0) {
    // Half a frame is on the wire: the stream cannot be resynchronised.
    kClientLog.Warn("{}: {}: partial request write; closing the connection", peer_, what);
    ::shutdown(fd_.get(), SHUT_RDWR);
  }
  if (st.code() == Code::kDeadlineExceeded) return st.WithContext("ttrpc: " + what);
  return Unavailable("ttrpc: " + what + ": " + st.message());
}

Result<std::string> ClientImpl::Await(uint32_t stream_id, std::future<Result<std::string>> reply,
                                      Deadline deadline, const std::string& what) {
  if (deadline && reply.wait_until(*deadline) == std::future_status::timeout) {
    std::lock_guard lock(mu_);
    // If the entry is still ours, the call timed out; otherwise the reader
    // has just claimed it and the value is about to arrive.
    if (pending_.erase(stream_id) == 1) {
      return DeadlineExceeded("ttrpc: " + what + ": no response before the deadline");
    }
  }
  return reply.get();
}

void ClientImpl::ReadLoop() {
  FrameDecoder decoder;
  std::vector<char> buf(kReadChunkBytes);
  Status why = Unavailable("ttrpc: connection to " + peer_ + " closed");
  while (true) {
    Result<size_t> n = ReadSome(fd_.get(), buf.data(), buf.size());
    if (!n.ok()) {
      why = Unavailable("ttrpc: connection to " + peer_ + ": " + n.status().message());
      break;
    }
    if (*n == 0) break;
    decoder.Feed(std::string_view(buf.data(), *n));
    std::optional<DecodedFrame> frame;
    bool broken = false;
    while (!broken && (frame = decoder.Next())) {
      const FrameHeader& h = frame->header;
      if (frame->oversized) {
        Complete(h.stream_id, ResourceExhausted("ttrpc: response of " + std::to_string(h.length) +
                                                " bytes exceeds maximum message size"));
      } else if (h.type != static_cast<uint8_t>(FrameType::kResponse)) {
        why = Unavailable("ttrpc: protocol error from " + peer_ + ": frame type " +
                          std::to_string(h.type) + " is not a response");
        broken = true;
      } else {
        Complete(h.stream_id, ParseResponse(frame->payload));
      }
    }
    if (broken) break;
  }
  kClientLog.Debug("{}: {}", peer_, why.message());
  ::shutdown(fd_.get(), SHUT_RDWR);
  FailAll(why);
}

Result<std::string> ClientImpl::ParseResponse(const std::string& bytes) {
  ::ttrpc::Response resp;
  if (!resp.ParseFromString(bytes)) {
    return Internal("ttrpc: unparsable Response (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (resp.has_status()) {
    Status st = StatusFromProto(resp.status());
    if (!st.ok()) return st;
  }
  return std::move(*resp.mutable_payload());
}

void ClientImpl::Complete(uint32_t stream_id, Result<std::string> result) {
  Promise p;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(stream_id);
    if (it == pending_.end()) {
      kClientLog.Debug("{}: discarding response for stream {} (timed out or unknown)", peer_, stream_id);
      return;
    }
    p = std::move(it->second);
    pending_.erase(it);
  }
  p.set_value(std::move(result));
}

void ClientImpl::FailAll(const Status& status) {
  std::map<uint32_t, Promise> pending;
  {
    std::lock_guard lock(mu_);
    if (!closed_) closed_ = status;
    pending.swap(pending_);
  }
  for (auto& [id, p] : pending) p.set_value(*closed_);
}

void ClientImpl::Close() {
  {
    std::lock_guard lock(mu_);
    if (!closed_) closed_ = Unavailable("ttrpc: client closed");
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
  std::lock_guard join(join_mu_);
  if (reader_.joinable()) reader_.join();
}

Status CheckStreamSocket(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
    return ErrnoStatus("ttrpc client: fd " + std::to_string(fd) + " is not a socket");
  }
  if (type != SOCK_STREAM) {
    return InvalidArgument("ttrpc client: fd " + std::to_string(fd) + " is not a stream socket");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Dial(const std::string& address,
                                             std::chrono::milliseconds timeout) {
  const std::string path = StripUnixScheme(address);
  Result<UniqueFd> fd = ConnectUnix(path, {.listen_wait = timeout});
  if (!fd.ok()) return std::move(fd).status().WithContext("ttrpc: dial");
  try {
    return std::unique_ptr<Client>(std::make_unique<ClientImpl>(std::move(*fd), path));
  } catch (const std::system_error& e) {
    return ResourceExhausted(std::string("ttrpc: cannot start client thread: ") + e.what());
  }
}

Result<std::unique_ptr<Client>> Client::FromFd(UniqueFd fd) {
  RETURN_IF_ERROR(CheckStreamSocket(fd.get()));
  RETURN_IF_ERROR_CTX(SetNonBlocking(fd.get(), false), "ttrpc client");
  const std::string peer = "fd " + std::to_string(fd.get());
  try {
    return std::unique_ptr<Client>(std::make_unique<ClientImpl>(std::move(fd), peer));
  } catch (const std::system_error& e) {
    return ResourceExhausted(std::string("ttrpc: cannot start client thread: ") + e.what());
  }
}

}  // namespace capsule::ttrpc
