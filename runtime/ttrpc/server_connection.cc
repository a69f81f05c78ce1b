// See server_connection.h.
#include "runtime/ttrpc/server_connection.h"

#include <sys/socket.h>

#include <exception>
#include <memory>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/ttrpc/socket_io.h"
#include "runtime/ttrpc/status_proto.h"

namespace capsule::ttrpc {
namespace {

const log::Logger kServerConnectionLog("ttrpc");

// Read size per read(2); large frames arrive over several reads.
constexpr size_t kReadChunkBytes = 64 * 1024;
// A handler thread idle this long exits; busy connections keep theirs.
constexpr std::chrono::seconds kWorkerIdleTimeout{30};
// Pool threads beyond the in-flight cap, for calls that have answered (or
// are answering) but whose thread has not returned to the pool yet.
constexpr size_t kFinishingCallsAllowance = 64;

CallContext MakeContext(const InboundCall& call) {
  const ::ttrpc::Request& req = call.request;
  CallContext ctx;
  ctx.service = req.service();
  ctx.method = req.method();
  ctx.metadata.reserve(static_cast<size_t>(req.metadata_size()));
  for (const auto& kv : req.metadata()) ctx.metadata.emplace_back(kv.key(), kv.value());
  if (req.timeout_nano() != 0) {
    // A negative timeout is a deadline already gone, as with Go's WithTimeout.
    ctx.deadline = call.received_at + std::chrono::nanoseconds(std::max<int64_t>(req.timeout_nano(), 0));
  }
  return ctx;
}

}  // namespace

ServerConnection::ServerConnection(UniqueFd fd, std::string name, const HandlerRegistry& registry,
                                   size_t max_inflight, std::function<void()> on_finished)
    : fd_(std::move(fd)),
      name_(std::move(name)),
      registry_(registry),
      max_inflight_(max_inflight == 0 ? 1 : max_inflight),
      on_finished_(std::move(on_finished)),
      // inflight_ is the cap; the pool also needs room for calls whose slot
      // is already released but whose thread is still writing the answer or
      // not yet back in the pool (RunCall), however late it gets scheduled.
      pool_(max_inflight_ + kFinishingCallsAllowance, kWorkerIdleTimeout) {}

ServerConnection::~ServerConnection() {
  Close();
  if (reader_.joinable()) reader_.join();
}

void ServerConnection::Start() { reader_ = std::thread([this] { ReadLoop(); }); }

void ServerConnection::Close() {
  closed_locally_ = true;
  ShutdownSocket();
}

void ServerConnection::ShutdownSocket() { ::shutdown(fd_.get(), SHUT_RDWR); }

void ServerConnection::ReadLoop() {
  FrameDecoder decoder;
  std::vector<char> buf(kReadChunkBytes);
  bool open = true;
  while (open) {
    Result<size_t> n = ReadSome(fd_.get(), buf.data(), buf.size());
    if (!n.ok()) {
      kServerConnectionLog.Debug("{}: {}", name_, n.status().ToString());
      break;
    }
    if (*n == 0) {
      if (!decoder.AtFrameBoundary()) {
        kServerConnectionLog.Warn("{}: peer closed mid-frame ({} bytes of a truncated frame dropped)", name_,
                                  decoder.buffered());
      }
      break;
    }
    decoder.Feed(std::string_view(buf.data(), *n));
    while (open) {
      std::optional<DecodedFrame> frame = decoder.Next();
      if (!frame) break;
      open = HandleFrame(std::move(*frame));
    }
  }
  if (open && !closed_locally_) {
    // The peer closed its side: answer what was read, then shut.
    pool_.Drain();
    ShutdownSocket();
  } else {
    // Protocol violation or local Close(): cut the peer off now, then wait
    // for the handlers already running.
    ShutdownSocket();
    pool_.Close();
  }
  kServerConnectionLog.Debug("{}: closed", name_);
  on_finished_();
}

bool ServerConnection::HandleFrame(DecodedFrame frame) {
  FrameAction action = stream_.Classify(std::move(frame));
  if (auto* close = std::get_if<CloseConnection>(&action)) {
    kServerConnectionLog.Warn("{}: closing connection: {}", name_, close->reason);
    return false;
  }
  if (auto* reply = std::get_if<ImmediateReply>(&action)) {
    kServerConnectionLog.Debug("{}: stream {}: {}", name_, reply->stream_id, reply->status.ToString());
    WriteResponse(reply->stream_id, reply->status, {});
    return true;
  }
  Dispatch(std::move(std::get<InboundCall>(action)));
  return true;
}

void ServerConnection::Dispatch(InboundCall call) {
  auto shared = std::make_shared<InboundCall>(std::move(call));
  if (inflight_.fetch_add(1) < max_inflight_) {
    if (pool_.TrySubmit([this, shared] { RunCall(*shared); })) return;
  }
  inflight_.fetch_sub(1);
  Status busy = ResourceExhausted("ttrpc: " + std::to_string(max_inflight_) +
                                  " requests already in flight on this connection; " +
                                  shared->request.service() + "/" + shared->request.method() +
                                  " refused");
  kServerConnectionLog.Warn("{}: {}", name_, busy.message());
  WriteResponse(shared->stream_id, busy, {});
}

void ServerConnection::RunCall(const InboundCall& call) {
  std::vector<std::function<void()>> after_reply;
  CallContext ctx = MakeContext(call);
  ctx.after_reply = &after_reply;
  Result<std::string> result = [&]() -> Result<std::string> {
    if (ctx.deadline && std::chrono::steady_clock::now() >= *ctx.deadline) {
      return DeadlineExceeded("ttrpc: deadline of " + ctx.service + "/" + ctx.method +
                              " passed before it started");
    }
    ASSIGN_OR_RETURN(auto handler, registry_.Lookup(ctx.service, ctx.method));
    try {
      return (*handler)(ctx, call.request.payload());
    } catch (const std::exception& e) {
      // Handlers should not throw; one that does fails its call, not the shim.
      kServerConnectionLog.Error("{}: handler {}/{} threw: {}", name_, ctx.service, ctx.method, e.what());
      return Internal("ttrpc: handler " + ctx.service + "/" + ctx.method + " failed: " + e.what());
    }
  }();
  // The call is over before its answer leaves: a client that sends its next
  // request the moment it reads this response must find the slot free.
  inflight_.fetch_sub(1);
  if (result.ok()) {
    WriteResponse(call.stream_id, Status::Ok(), std::move(*result));
  } else {
    WriteResponse(call.stream_id, result.status(), {});
  }
  for (auto& work : after_reply) {
    try {
      work();
    } catch (const std::exception& e) {
      kServerConnectionLog.Error("{}: work after the reply of {}/{} threw: {}", name_, ctx.service, ctx.method,
                                 e.what());
    }
  }
}

void ServerConnection::WriteResponse(uint32_t stream_id, const Status& status,
                                     std::string payload) {
  ::ttrpc::Response resp;
  // Always present, even when OK: Go clients reject a response without one.
  StatusToProto(status, resp.mutable_status());
  resp.set_payload(std::move(payload));
  const size_t size = resp.ByteSizeLong();
  if (size > kMaxPayloadBytes) {
    kServerConnectionLog.Warn("{}: stream {}: response of {} bytes over the {} byte limit", name_, stream_id, size,
                              kMaxPayloadBytes);
    resp.Clear();
    StatusToProto(ResourceExhausted("ttrpc: response of " + std::to_string(size) +
                                    " bytes exceeds maximum message size of " +
                                    std::to_string(kMaxPayloadBytes)),
                  resp.mutable_status());
  }
  std::string frame = EncodeFrame(stream_id, FrameType::kResponse, resp);
  std::lock_guard lock(write_mu_);
  Status st = SendAll(fd_.get(), frame);
  if (!st.ok()) kServerConnectionLog.Debug("{}: stream {}: response dropped: {}", name_, stream_id, st.ToString());
}

}  // namespace capsule::ttrpc
