// The vhost-user request dispatcher. QEMU 7.2's vhost-user-vsock sends, at
// realize: GET_FEATURES, GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES,
// GET_QUEUE_NUM, SET_OWNER, SET_VRING_CALL per queue, GET_CONFIG; when the
// driver starts the device: SET_FEATURES, SET_MEM_TABLE, then per queue
// SET_VRING_NUM/BASE/ADDR/KICK/CALL and SET_VRING_ENABLE; GET_VRING_BASE
// when it stops (VM paused or reset). Everything else is refused politely.
#include "runtime/vsock/vhost_user_server.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {

using vhost_user::Message;
using vhost_user::Request;

Result<VhostUserServerPtr> VhostUserServer::Listen(EventLoop& loop, const std::string& socket_path,
                                                   VhostUserBackend& backend, DisconnectFn on_disconnect) {
  ASSIGN_OR_RETURN(UniqueFd fd, ListenUnix(socket_path, 1));
  VhostUserServerPtr server(new VhostUserServer(loop, socket_path, std::move(fd), backend, std::move(on_disconnect)));
  VhostUserServer* self = server.get();
  Status s = loop.Add(self->listen_fd_.get(), EPOLLIN, [self](uint32_t) { self->OnAccept(); });
  if (!s.ok()) return s.WithContext("watch vhost-user socket " + socket_path);
  return server;
}

Result<VhostUserServerPtr> VhostUserServer::Serve(EventLoop& loop, UniqueFd connection, VhostUserBackend& backend,
                                                  DisconnectFn on_disconnect) {
  RETURN_IF_ERROR(SetNonBlocking(connection.get(), true));
  VhostUserServerPtr server(new VhostUserServer(loop, "", UniqueFd(), backend, std::move(on_disconnect)));
  RETURN_IF_ERROR(server->Attach(std::move(connection)));
  return server;
}

VhostUserServer::VhostUserServer(EventLoop& loop, std::string path, UniqueFd listen_fd, VhostUserBackend& backend,
                                 DisconnectFn on_disconnect)
    : loop_(loop),
      path_(std::move(path)),
      listen_fd_(std::move(listen_fd)),
      backend_(backend),
      on_disconnect_(std::move(on_disconnect)) {}

VhostUserServer::~VhostUserServer() {
  if (channel_) {
    loop_.Remove(channel_->fd());
    for (uint32_t i = 0; i < backend_.NumQueues(); ++i) StopQueue(i);
    backend_.OnFrontendGone();
    for (uint32_t i = 0; i < backend_.NumQueues(); ++i) backend_.queue(i).Reset();
  }
  if (listen_fd_) {
    loop_.Remove(listen_fd_.get());
    ::unlink(path_.c_str());
  }
}

namespace {

bool PeerClosed(int fd) {
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace

void VhostUserServer::OnAccept() {
  UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) {
    if (errno != EAGAIN && errno != EINTR) log_.Warn("accept on {}: {}", path_, std::strerror(errno));
    return;
  }
  if (channel_ && !channel_->received_any() && PeerClosed(channel_->fd())) {
    // The liveness probe of ListenUnix may still look connected here when
    // its hang-up and the real front end arrive in the same epoll round.
    Disconnect(Unavailable("a silent client closed " + path_));
  }
  if (channel_) {
    log_.Warn("refused a second front end on {}: one is already connected", path_);
    return;
  }
  Status s = Attach(std::move(fd));
  if (!s.ok()) log_.Error("watch front-end connection: {}", s.ToString());
}

Status VhostUserServer::Attach(UniqueFd fd) {
  int raw = fd.get();
  channel_ = std::make_unique<VhostUserChannel>(std::move(fd));
  Status s = loop_.Add(raw, EPOLLIN, [this](uint32_t ev) { OnReadable(ev); });
  if (!s.ok()) {
    channel_.reset();
    return s;
  }
  log_.Debug("client connected on {}", path_);
  return Status::Ok();
}

void VhostUserServer::OnReadable(uint32_t /*events*/) {
  if (!channel_) return;
  std::vector<Message> msgs;
  Status read_status = channel_->ReadAvailable(&msgs);
  for (Message& m : msgs) {
    if (messages_++ == 0) log_.Info("front end connected on {}", path_);
    Handle(m);
    if (!channel_) return;
  }
  if (!read_status.ok()) Disconnect(read_status);
}

void VhostUserServer::Disconnect(const Status& why) {
  if (!channel_) return;
  bool was_frontend = channel_->received_any();
  if (!was_frontend) {
    // reported below at debug level
  } else if (why.code() == Code::kUnavailable) {
    log_.Info("front end disconnected: {}", why.message());
  } else {
    log_.Warn("dropping front end: {}", why.ToString());
  }
  loop_.Remove(channel_->fd());
  for (uint32_t i = 0; i < backend_.NumQueues(); ++i) StopQueue(i);
  backend_.OnFrontendGone();
  for (uint32_t i = 0; i < backend_.NumQueues(); ++i) backend_.queue(i).Reset();
  mem_.reset();
  acked_features_ = acked_protocol_ = 0;
  channel_.reset();
  // A client that never sent a byte was only checking the socket is alive
  // (ListenUnix does that); it was never the device's front end.
  messages_ = 0;
  if (!was_frontend) {
    log_.Debug("a client closed {} without sending a request", path_);
    return;
  }
  if (on_disconnect_) on_disconnect_(why);
}

namespace {

bool HasExplicitReply(uint32_t request) {
  switch (static_cast<Request>(request)) {
    case Request::kGetFeatures:
    case Request::kGetProtocolFeatures:
    case Request::kGetVringBase:
    case Request::kGetQueueNum:
    case Request::kGetConfig:
      return true;
    default:
      return false;
  }
}

}  // namespace

void VhostUserServer::Handle(Message& msg) {
  log_.Debug("<- {} flags=0x{:x} size={} fds={}", msg.name(), msg.hdr.flags, msg.hdr.size, msg.fds.size());
  Status reply_status;
  if (HasExplicitReply(msg.hdr.request)) {
    Result<std::vector<uint8_t>> r = HandleWithReply(msg);
    if (!r.ok()) log_.Warn("{} failed: {}", msg.name(), r.status().ToString());
    // A reply without payload tells QEMU the request failed.
    reply_status = channel_->Reply(msg.hdr.request, r.ok() ? *r : std::vector<uint8_t>{});
  } else {
    Status s = HandleNoReply(msg);
    if (!s.ok()) log_.Warn("{} (request {}) failed: {}", msg.name(), msg.hdr.request, s.ToString());
    if (msg.need_reply()) reply_status = channel_->Reply(msg.hdr.request, vhost_user::EncodeU64(s.ok() ? 0 : 1));
  }
  if (!reply_status.ok()) Disconnect(reply_status);
}

Result<std::vector<uint8_t>> VhostUserServer::HandleWithReply(Message& msg) {
  switch (static_cast<Request>(msg.hdr.request)) {
    case Request::kGetFeatures:
      return vhost_user::EncodeU64(backend_.Features());
    case Request::kGetProtocolFeatures:
      return vhost_user::EncodeU64(backend_.ProtocolFeatures());
    case Request::kGetQueueNum:
      return vhost_user::EncodeU64(backend_.NumQueues());
    case Request::kGetVringBase:
      return GetVringBase(msg);
    case Request::kGetConfig:
      return GetConfig(msg);
    default:
      return Internal("not a request with a reply");
  }
}

Status VhostUserServer::HandleNoReply(Message& msg) {
  switch (static_cast<Request>(msg.hdr.request)) {
    case Request::kSetFeatures: return SetFeatures(msg);
    case Request::kSetProtocolFeatures: return SetProtocolFeatures(msg);
    case Request::kSetOwner:
      log_.Info("front end took ownership");
      return Status::Ok();
    case Request::kResetOwner:
      // Deprecated; the spec recommends treating it as "disable all rings".
      for (uint32_t i = 0; i < backend_.NumQueues(); ++i) backend_.queue(i).set_enabled(false);
      backend_.OnQueuesChanged();
      return Status::Ok();
    case Request::kSetMemTable: return SetMemTable(msg);
    case Request::kSetVringNum: return SetVringNum(msg);
    case Request::kSetVringAddr: return SetVringAddr(msg);
    case Request::kSetVringBase: return SetVringBase(msg);
    case Request::kSetVringKick: return SetVringKick(msg);
    case Request::kSetVringCall:
    case Request::kSetVringErr: return SetVringFd(msg);
    case Request::kSetVringEnable: return SetVringEnable(msg);
    case Request::kSetConfig: return SetConfig(msg);
    default:
      return Unimplemented(fmt::format("vhost-user request {} ({}) is not supported", msg.hdr.request, msg.name()));
  }
}

Result<Virtqueue*> VhostUserServer::QueueAt(uint32_t index, std::string_view request) {
  if (index >= backend_.NumQueues())
    return InvalidArgument(fmt::format("{}: vring {} out of range (device has {})", request, index, backend_.NumQueues()));
  return &backend_.queue(index);
}

Status VhostUserServer::SetFeatures(const Message& msg) {
  ASSIGN_OR_RETURN(uint64_t v, vhost_user::DecodeU64(msg));
  uint64_t unknown = v & ~backend_.Features();
  if (unknown != 0) return InvalidArgument(fmt::format("SET_FEATURES: bits 0x{:x} were not offered", unknown));
  acked_features_ = v;
  bool event_idx = (v & (1ULL << 29)) != 0;  // VIRTIO_RING_F_EVENT_IDX
  for (uint32_t i = 0; i < backend_.NumQueues(); ++i) {
    backend_.queue(i).SetEventIdx(event_idx);
    // Without protocol features, rings start enabled (vhost-user "Ring states").
    if (!ProtocolFeaturesAcked()) backend_.queue(i).set_enabled(true);
  }
  backend_.SetAckedFeatures(v);
  log_.Info("features acked: 0x{:x}", v);
  return Status::Ok();
}

Status VhostUserServer::SetProtocolFeatures(const Message& msg) {
  ASSIGN_OR_RETURN(uint64_t v, vhost_user::DecodeU64(msg));
  uint64_t unknown = v & ~backend_.ProtocolFeatures();
  if (unknown != 0) return InvalidArgument(fmt::format("SET_PROTOCOL_FEATURES: bits 0x{:x} were not offered", unknown));
  acked_protocol_ = v;
  log_.Info("protocol features acked: 0x{:x}", v);
  return Status::Ok();
}

Status VhostUserServer::SetMemTable(Message& msg) {
  std::vector<UniqueFd> fds;
  ASSIGN_OR_RETURN(std::vector<MemoryRegionDesc> regions, vhost_user::DecodeMemTable(msg, &fds));
  ASSIGN_OR_RETURN(GuestMemoryPtr mem, GuestMemory::Map(regions, std::move(fds)));
  for (uint32_t i = 0; i < backend_.NumQueues(); ++i) {
    Status s = backend_.queue(i).Resolve(mem.get());
    if (!s.ok()) log_.Warn("vring {} after SET_MEM_TABLE: {}", i, s.ToString());
  }
  mem_ = std::move(mem);  // the old mapping goes only after the queues moved off it
  for (const MemoryRegionDesc& r : regions)
    log_.Info("guest memory: gpa 0x{:x} size 0x{:x} uva 0x{:x}", r.guest_phys_addr, r.size, r.user_addr);
  backend_.OnQueuesChanged();
  return Status::Ok();
}

Status VhostUserServer::SetVringNum(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringState st, vhost_user::DecodeVringState(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(st.index, msg.name()));
  RETURN_IF_ERROR_CTX(q->SetSize(st.num), fmt::format("SET_VRING_NUM {}", st.index));
  // QEMU sends NUM before ADDR, so addresses kept from an earlier start may
  // be stale here; the ring stays unusable until SET_VRING_ADDR fixes them.
  Status s = q->Resolve(mem_.get());
  if (!s.ok()) log_.Debug("vring {} awaits new addresses: {}", st.index, s.message());
  return Status::Ok();
}

Status VhostUserServer::SetVringAddr(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringAddr a, vhost_user::DecodeVringAddr(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(a.index, msg.name()));
  // VHOST_VRING_F_LOG asks for dirty logging, which needs VHOST_F_LOG_ALL (not offered).
  if (a.flags & 1u) return InvalidArgument(fmt::format("SET_VRING_ADDR {}: dirty logging not supported", a.index));
  q->SetAddresses(a.desc, a.avail, a.used);
  RETURN_IF_ERROR_CTX(q->Resolve(mem_.get()), fmt::format("SET_VRING_ADDR {}", a.index));
  backend_.OnQueuesChanged();
  return Status::Ok();
}

Status VhostUserServer::SetVringBase(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringState st, vhost_user::DecodeVringState(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(st.index, msg.name()));
  if (st.num > 0xffff) return InvalidArgument(fmt::format("SET_VRING_BASE {}: base {} above 65535", st.index, st.num));
  q->SetBase(static_cast<uint16_t>(st.num));
  return Status::Ok();
}

void VhostUserServer::StopQueue(uint32_t index) {
  Virtqueue& q = backend_.queue(index);
  if (q.kick_fd() >= 0) loop_.Remove(q.kick_fd());
  q.set_kick(UniqueFd());
  q.set_started(false);
}

Result<std::vector<uint8_t>> VhostUserServer::GetVringBase(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringState st, vhost_user::DecodeVringState(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(st.index, msg.name()));
  StopQueue(st.index);
  backend_.OnQueuesChanged();
  log_.Info("vring {} stopped at avail index {}", st.index, q->last_avail_idx());
  return vhost_user::EncodeVringState({st.index, q->last_avail_idx()});
}

Status VhostUserServer::SetVringKick(Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringFile f, vhost_user::DecodeVringFile(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(f.index, msg.name()));
  if (!f.fd) return Unimplemented(fmt::format("SET_VRING_KICK {}: polling mode (no eventfd) not supported", f.index));
  if (q->kick_fd() >= 0) loop_.Remove(q->kick_fd());
  int raw = f.fd.get();
  q->set_kick(std::move(f.fd));
  uint32_t index = f.index;
  RETURN_IF_ERROR_CTX(loop_.Add(raw, EPOLLIN,
                                [this, raw, index](uint32_t) {
                                  uint64_t n;
                                  (void)!::read(raw, &n, sizeof n);  // drain the eventfd
                                  backend_.OnKick(index);
                                }),
                      fmt::format("watch kick eventfd of vring {}", index));
  q->set_started(true);
  if (!ProtocolFeaturesAcked()) q->set_enabled(true);
  log_.Info("vring {} started (size {}, base {})", index, q->size(), q->last_avail_idx());
  backend_.OnQueuesChanged();
  return Status::Ok();
}

Status VhostUserServer::SetVringFd(Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringFile f, vhost_user::DecodeVringFile(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(f.index, msg.name()));
  if (msg.hdr.request == static_cast<uint32_t>(Request::kSetVringCall)) {
    q->set_call(std::move(f.fd));
  } else {
    q->set_err(std::move(f.fd));
  }
  return Status::Ok();
}

Status VhostUserServer::SetVringEnable(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::VringState st, vhost_user::DecodeVringState(msg));
  ASSIGN_OR_RETURN(Virtqueue * q, QueueAt(st.index, msg.name()));
  if (!ProtocolFeaturesAcked())
    return FailedPrecondition("SET_VRING_ENABLE before VHOST_USER_F_PROTOCOL_FEATURES was acked");
  if (st.num > 1) return InvalidArgument(fmt::format("SET_VRING_ENABLE {}: value {} is not 0 or 1", st.index, st.num));
  q->set_enabled(st.num == 1);
  log_.Info("vring {} {}", st.index, st.num == 1 ? "enabled" : "disabled");
  backend_.OnQueuesChanged();
  return Status::Ok();
}

Result<std::vector<uint8_t>> VhostUserServer::GetConfig(const Message& msg) {
  if ((acked_protocol_ & vhost_user::kProtocolConfig) == 0)
    return FailedPrecondition("GET_CONFIG without VHOST_USER_PROTOCOL_F_CONFIG acked");
  ASSIGN_OR_RETURN(vhost_user::ConfigAccess c, vhost_user::DecodeConfig(msg, false));
  ASSIGN_OR_RETURN(std::vector<uint8_t> data, backend_.ReadConfig(c.offset, c.size));
  log_.Info("config read: offset {} size {}", c.offset, c.size);
  return vhost_user::EncodeConfig(c.offset, c.flags, data);
}

Status VhostUserServer::SetConfig(const Message& msg) {
  ASSIGN_OR_RETURN(vhost_user::ConfigAccess c, vhost_user::DecodeConfig(msg, true));
  // The vsock config space (guest_cid) is read-only; a migration restore
  // may write it back unchanged (vhost-user.rst, SET_CONFIG).
  if (c.flags & vhost_user::kConfigFlagMigration) return Status::Ok();
  return FailedPrecondition(fmt::format("SET_CONFIG offset {} size {}: config space is read-only", c.offset, c.size));
}

}  // namespace capsule::vsock
