// Standard I/O RPCs and the OOM long poll. Reads, writes and GetOOMEvent
// block; each gives up when the gRPC call is cancelled.
#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/validate.h"

namespace capsule::agent::containers {
namespace {

engine::CancelCheck CancelOf(const server::CallContext& ctx) {
  return engine::CancelCheck([&ctx] { return ctx.cancelled(); });
}

Status CheckProcess(const std::string& container_id, const std::string& exec_id) {
  return CheckProcessTarget(container_id, exec_id, /*allow_init=*/true);
}

}  // namespace

Result<v1::WriteStreamResponse> EngineOps::WriteStdin(const v1::WriteStreamRequest& req,
                                                      const server::CallContext& ctx) {
  RETURN_IF_ERROR(CheckProcess(req.container_id(), req.exec_id()));
  ASSIGN_OR_RETURN(engine::ProcessIoPtr io, LookupIo(req.container_id(), req.exec_id()));
  ASSIGN_OR_RETURN(size_t written, io->Write(req.data(), CancelOf(ctx)));
  v1::WriteStreamResponse resp;
  resp.set_len(static_cast<uint32_t>(written));
  return resp;
}

Result<v1::ReadStreamResponse> EngineOps::Read(const v1::ReadStreamRequest& req, engine::Stream stream,
                                               const server::CallContext& ctx) {
  RETURN_IF_ERROR(CheckProcess(req.container_id(), req.exec_id()));
  ASSIGN_OR_RETURN(engine::ProcessIoPtr io, LookupIo(req.container_id(), req.exec_id()));
  ASSIGN_OR_RETURN(engine::ReadResult read, io->Read(stream, ReadLen(req.len()), CancelOf(ctx)));
  return ReadResultToProto(std::move(read));
}

Result<v1::ReadStreamResponse> EngineOps::ReadStdout(const v1::ReadStreamRequest& req,
                                                     const server::CallContext& ctx) {
  return Read(req, engine::Stream::kStdout, ctx);
}

Result<v1::ReadStreamResponse> EngineOps::ReadStderr(const v1::ReadStreamRequest& req,
                                                     const server::CallContext& ctx) {
  return Read(req, engine::Stream::kStderr, ctx);
}

Status EngineOps::CloseStdin(const v1::CloseStdinRequest& req) {
  RETURN_IF_ERROR(CheckProcess(req.container_id(), req.exec_id()));
  ASSIGN_OR_RETURN(engine::ProcessIoPtr io, LookupIo(req.container_id(), req.exec_id()));
  return io->CloseStdin();
}

Status EngineOps::TtyWinResize(const v1::TtyWinResizeRequest& req) {
  RETURN_IF_ERROR(CheckProcess(req.container_id(), req.exec_id()));
  RETURN_IF_ERROR(CheckWinSize(req.row(), req.column()));
  ASSIGN_OR_RETURN(engine::ProcessIoPtr io, LookupIo(req.container_id(), req.exec_id()));
  return io->Resize(req.row(), req.column());
}

Result<v1::OOMEvent> EngineOps::GetOOMEvent(const v1::GetOOMEventRequest&, const server::CallContext& ctx) {
  ASSIGN_OR_RETURN(PodPtr pod, pods_->Current());
  for (;;) {
    if (std::optional<std::string> id = pod->engine().WaitOomEvent(kOomPollInterval)) {
      v1::OOMEvent event;
      event.set_container_id(*id);
      return event;
    }
    if (ctx.cancelled()) return Cancelled("GetOOMEvent: the caller gave up");
    auto current = pods_->Current();
    if (!current.ok() || *current != pod) return FailedPrecondition("sandbox " + pod->id() + " was destroyed");
  }
}

}  // namespace capsule::agent::containers
