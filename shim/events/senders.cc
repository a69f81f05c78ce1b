// See senders.h.
#include "shim/events/senders.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/empty.pb.h>

#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::events {
namespace {

Result<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  return std::make_pair(UniqueFd(p[0]), UniqueFd(p[1]));
}

std::string ReadAll(int fd, size_t limit) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while (out.size() < limit && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

Status TtrpcSender::Send(const ev::Envelope& envelope) {
  if (!client_) {
    auto client = ttrpc::Client::Dial(address_, kDialTimeout);
    if (!client.ok()) return Unavailable("dial " + address_ + ": " + client.status().message());
    client_ = std::move(*client);
  }
  ev::ForwardRequest req;
  *req.mutable_envelope() = envelope;
  google::protobuf::Empty resp;
  ttrpc::CallOptions opts;
  opts.timeout = kForwardTimeout;
  opts.metadata = {{kNamespaceMetadataKey, envelope.namespace_()}};
  Status st = client_->Call(kEventsService, kForwardMethod, req, &resp, opts);
  if (!st.ok() && (st.code() == Code::kUnavailable || st.code() == Code::kDeadlineExceeded)) {
    client_->Close();
    client_.reset();  // containerd restarted or the connection broke: redial next time
  }
  return st;
}

Status BinarySender::Send(const ev::Envelope& envelope) {
  const std::string payload = envelope.event().SerializeAsString();
  ASSIGN_OR_RETURN(auto in, Pipe());
  ASSIGN_OR_RETURN(auto err, Pipe());
  SpawnOptions o;
  o.argv = {binary_, "--address", address_, "publish", "--topic", envelope.topic(), "--namespace",
            envelope.namespace_()};
  o.stdin_fd = in.first.get();
  o.stderr_fd = err.second.get();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  in.first.reset();
  err.second.reset();
  // Events are small (far below a pipe's 64 KiB): one write, then EOF.
  Status wrote = Status::Ok();
  if (::write(in.second.get(), payload.data(), payload.size()) != static_cast<ssize_t>(payload.size()))
    wrote = ErrnoStatus("write event to " + binary_);
  in.second.reset();
  const std::string stderr_text = ReadAll(err.first.get(), 4096);
  auto status = child.Wait(kPublishBinaryTimeout);
  if (!status.ok()) return Unavailable(binary_ + " publish did not finish: " + status.status().message());
  RETURN_IF_ERROR(wrote);
  if (ExitCode(*status) != 0)
    return Unavailable(binary_ + " publish exited " + std::to_string(ExitCode(*status)) + ": " + stderr_text);
  return Status::Ok();
}

Result<SenderPtr> MakeSender(const std::string& ttrpc_address, const std::string& publish_binary,
                             const std::string& containerd_address) {
  if (!ttrpc_address.empty()) return SenderPtr(std::make_unique<TtrpcSender>(ttrpc_address));
  if (!publish_binary.empty() && !containerd_address.empty())
    return SenderPtr(std::make_unique<BinarySender>(publish_binary, containerd_address));
  return InvalidArgument("no way to publish events: neither TTRPC_ADDRESS nor -publish-binary with -address is set");
}

}  // namespace capsule::shim::events
