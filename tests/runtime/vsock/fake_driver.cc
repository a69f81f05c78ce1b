// The fake driver's rings live in one memfd region at offsets below; ring
// indices are accessed atomically because the back end runs concurrently
// (another thread or process) on its own mapping of the same memory.
#include "tests/runtime/vsock/fake_driver.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "runtime/common/unix_stream.h"
#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock::testing {

using vhost_user::Request;

namespace {

constexpr uint16_t kDescNext = 1;
constexpr uint16_t kDescWrite = 2;
constexpr uint64_t kRingStride = 0x10000;  // room for rings of up to 4096 entries
constexpr uint64_t kVersion1 = 1ULL << 32;
constexpr uint64_t kEventIdx = 1ULL << 29;

uint16_t Load16(const uint8_t* p) {
  return std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(p)))
      .load(std::memory_order_acquire);
}
void Store16(uint8_t* p, uint16_t v) {
  std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t*>(p)).store(v, std::memory_order_release);
}
std::vector<uint8_t> U64(uint64_t v) { return vhost_user::EncodeU64(v); }
std::vector<uint8_t> State(uint32_t index, uint32_t num) { return vhost_user::EncodeVringState({index, num}); }
bool NeedEvent(uint16_t event, uint16_t new_idx, uint16_t old_idx) {
  return static_cast<uint16_t>(new_idx - event - 1) < static_cast<uint16_t>(new_idx - old_idx);
}

}  // namespace

PacketHeader GuestPacket(uint64_t cid, Op op, uint32_t src_port, uint32_t dst_port, uint32_t buf_alloc,
                         uint32_t fwd_cnt) {
  PacketHeader h;
  h.src_cid = cid;
  h.dst_cid = kHostCid;
  h.src_port = src_port;
  h.dst_port = dst_port;
  h.type = kTypeStream;
  h.op = static_cast<uint16_t>(op);
  h.buf_alloc = buf_alloc;
  h.fwd_cnt = fwd_cnt;
  return h;
}

Result<std::unique_ptr<FakeDriver>> FakeDriver::Connect(const std::string& socket_path, Options options) {
  std::unique_ptr<FakeDriver> d(new FakeDriver(options));
  ASSIGN_OR_RETURN(d->sock_, ConnectUnix(socket_path));
  RETURN_IF_ERROR(d->SetupMemory());
  return d;
}

FakeDriver::~FakeDriver() {
  if (mem_ != nullptr) ::munmap(mem_, opt_.mem_size);
}

Status FakeDriver::SetupMemory() {
  memfd_.reset(::memfd_create("fake-guest-ram", MFD_CLOEXEC));
  if (!memfd_) return ErrnoStatus("memfd_create");
  if (::ftruncate(memfd_.get(), static_cast<off_t>(opt_.mem_size)) != 0) return ErrnoStatus("ftruncate memfd");
  void* p = ::mmap(nullptr, opt_.mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus("mmap memfd");
  mem_ = static_cast<uint8_t*>(p);
  rx_.desc = 0, rx_.avail = kRingStride, rx_.used = 2 * kRingStride;
  tx_.desc = 3 * kRingStride, tx_.avail = 4 * kRingStride, tx_.used = 5 * kRingStride;
  rx_bufs_ = 6 * kRingStride;
  rx_stride_ = static_cast<uint32_t>((kPacketHeaderSize + opt_.rx_buf_size + 63) & ~uint64_t{63});
  size_t nbufs = opt_.rx_split_header ? opt_.queue_size / 2 : opt_.queue_size;
  rx_posted_.assign(nbufs, false);
  tx_area_ = tx_next_ = rx_bufs_ + uint64_t{rx_stride_} * nbufs;
  for (uint16_t i = 0; i < opt_.queue_size; ++i) tx_free_.push_back(i);
  for (Ring* r : {&rx_, &tx_}) {
    r->kick.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    r->call.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    r->err.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  }
  for (auto& m : masked_call_) m.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  return Status::Ok();
}

uint8_t* FakeDriver::Host(uint64_t gpa) { return mem_ + (gpa - opt_.gpa_base); }

// ---- vhost-user ----

Status FakeDriver::Send(uint32_t request, const std::vector<uint8_t>& payload, const std::vector<int>& fds,
                        uint32_t extra_flags) {
  std::vector<uint8_t> buf = vhost_user::EncodeHeader(
      {request, vhost_user::kVersion | extra_flags, static_cast<uint32_t>(payload.size())});
  buf.insert(buf.end(), payload.begin(), payload.end());
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 8)] = {};
  if (!fds.empty()) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(sock_.get(), &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(buf.size()))
    return ErrnoStatus(std::string("send ") + std::string(vhost_user::RequestName(request)));
  return Status::Ok();
}

Status FakeDriver::SendBytes(const std::vector<uint8_t>& raw) {
  if (::send(sock_.get(), raw.data(), raw.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(raw.size()))
    return ErrnoStatus("send raw bytes");
  return Status::Ok();
}

Result<vhost_user::Message> FakeDriver::Recv(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(WaitFd(sock_.get(), POLLIN, timeout, "vhost-user reply"));
  uint8_t hdr[vhost_user::kHeaderSize];
  if (::recv(sock_.get(), hdr, sizeof hdr, MSG_WAITALL) != static_cast<ssize_t>(sizeof hdr))
    return Unavailable("vhost-user back end closed the socket");
  vhost_user::Message m;
  std::memcpy(&m.hdr, hdr, sizeof hdr);
  m.payload.resize(m.hdr.size);
  if (m.hdr.size > 0 &&
      ::recv(sock_.get(), m.payload.data(), m.hdr.size, MSG_WAITALL) != static_cast<ssize_t>(m.hdr.size))
    return Unavailable("short vhost-user reply");
  return m;
}

Result<uint64_t> FakeDriver::GetU64(Request r) {
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(r), {}));
  ASSIGN_OR_RETURN(vhost_user::Message m, Recv());
  return vhost_user::DecodeU64(m);
}

Result<uint64_t> FakeDriver::SendAcked(Request r, const std::vector<uint8_t>& payload, const std::vector<int>& fds) {
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(r), payload, fds, vhost_user::kNeedReplyFlag));
  ASSIGN_OR_RETURN(vhost_user::Message m, Recv());
  if (m.hdr.request != static_cast<uint32_t>(r)) return Internal("reply to another request");
  return vhost_user::DecodeU64(m);
}

Result<std::vector<uint8_t>> FakeDriver::GetConfig(uint32_t offset, uint32_t size) {
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kGetConfig),
                       vhost_user::EncodeConfig(offset, 0, std::vector<uint8_t>(size, 0))));
  ASSIGN_OR_RETURN(vhost_user::Message m, Recv());
  if (m.payload.empty()) return FailedPrecondition("GET_CONFIG refused (empty reply)");
  ASSIGN_OR_RETURN(vhost_user::ConfigAccess c, vhost_user::DecodeConfig(m, true));
  return c.data;
}

bool FakeDriver::WaitPeerClosed(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!WaitFd(sock_.get(), POLLIN, left, "vhost-user socket").ok()) return false;
    char c;
    ssize_t n = ::recv(sock_.get(), &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
  }
  return false;
}

Status FakeDriver::Realize() {
  ASSIGN_OR_RETURN(offered_, GetU64(Request::kGetFeatures));
  if ((offered_ & vhost_user::kFeatureProtocolFeatures) == 0) return FailedPrecondition("no protocol features");
  ASSIGN_OR_RETURN(uint64_t pf, GetU64(Request::kGetProtocolFeatures));
  protocol_ = pf & (vhost_user::kProtocolMq | vhost_user::kProtocolReplyAck | vhost_user::kProtocolConfig);
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kSetProtocolFeatures), U64(protocol_)));
  if (protocol_ & vhost_user::kProtocolMq) RETURN_IF_ERROR(GetU64(Request::kGetQueueNum).status());
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kSetOwner), {}));
  RETURN_IF_ERROR(GetU64(Request::kGetFeatures).status());
  for (uint32_t q = 0; q < 2; ++q) {
    RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kSetVringCall), U64(q), {masked_call_[q].get()}));
    Ring& r = q == 0 ? rx_ : tx_;
    RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kSetVringErr), U64(q), {r.err.get()}));
  }
  return GetConfig(0, 8).status();
}

Status FakeDriver::SetupRing(uint32_t index, Ring& r, bool resume) {
  auto acked = [&](Request req, const std::vector<uint8_t>& p, const std::vector<int>& fds = {}) -> Status {
    ASSIGN_OR_RETURN(uint64_t v, SendAcked(req, p, fds));
    if (v != 0) return Internal(std::string(vhost_user::RequestName(static_cast<uint32_t>(req))) + " failed");
    return Status::Ok();
  };
  RETURN_IF_ERROR(acked(Request::kSetVringNum, State(index, opt_.queue_size)));
  RETURN_IF_ERROR(acked(Request::kSetVringBase, State(index, resume ? r.base : 0)));
  std::vector<uint8_t> addr(40, 0);
  uint64_t d = opt_.uva_base + r.desc, u = opt_.uva_base + r.used, a = opt_.uva_base + r.avail;
  std::memcpy(addr.data(), &index, 4);
  std::memcpy(addr.data() + 8, &d, 8);
  std::memcpy(addr.data() + 16, &u, 8);
  std::memcpy(addr.data() + 24, &a, 8);
  RETURN_IF_ERROR(acked(Request::kSetVringAddr, addr));
  RETURN_IF_ERROR(acked(Request::kSetVringKick, U64(index), {r.kick.get()}));
  RETURN_IF_ERROR(acked(Request::kSetVringCall, U64(index), {r.call.get()}));
  return acked(Request::kSetVringEnable, State(index, 1));
}

Status FakeDriver::Start() {
  acked_ = offered_ & (kVersion1 | vhost_user::kFeatureProtocolFeatures | (opt_.event_idx ? kEventIdx : 0));
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kSetFeatures), U64(acked_)));
  std::vector<uint8_t> table(8 + 32, 0);
  uint32_t one = 1;
  uint64_t size = opt_.mem_size, off = 0;
  std::memcpy(table.data(), &one, 4);
  std::memcpy(table.data() + 8, &opt_.gpa_base, 8);
  std::memcpy(table.data() + 16, &size, 8);
  std::memcpy(table.data() + 24, &opt_.uva_base, 8);
  std::memcpy(table.data() + 32, &off, 8);
  ASSIGN_OR_RETURN(uint64_t ack, SendAcked(Request::kSetMemTable, table, {memfd_.get()}));
  if (ack != 0) return Internal("SET_MEM_TABLE failed");
  RETURN_IF_ERROR(SetupRing(0, rx_, false));
  RETURN_IF_ERROR(SetupRing(1, tx_, false));
  PostRxBuffers();
  return Status::Ok();
}

Result<uint16_t> FakeDriver::GetVringBase(uint32_t index) {
  RETURN_IF_ERROR(Send(static_cast<uint32_t>(Request::kGetVringBase), State(index, 0)));
  ASSIGN_OR_RETURN(vhost_user::Message m, Recv());
  ASSIGN_OR_RETURN(vhost_user::VringState st, vhost_user::DecodeVringState(m));
  (index == 0 ? rx_ : tx_).base = static_cast<uint16_t>(st.num);
  return static_cast<uint16_t>(st.num);
}

Status FakeDriver::Resume() {
  RETURN_IF_ERROR(SetupRing(0, rx_, true));
  return SetupRing(1, tx_, true);
}

Status FakeDriver::ResetAndStart() {
  std::memset(mem_, 0, rx_bufs_);  // every ring, as a fresh driver lays them out
  for (Ring* r : {&rx_, &tx_}) r->avail_idx = r->last_used = r->base = 0;
  rx_posted_.assign(rx_posted_.size(), false);
  tx_free_.clear();
  for (uint16_t i = 0; i < opt_.queue_size; ++i) tx_free_.push_back(i);
  tx_chains_.clear();
  tx_next_ = tx_area_;
  RETURN_IF_ERROR(SetupRing(0, rx_, false));
  RETURN_IF_ERROR(SetupRing(1, tx_, false));
  PostRxBuffers();
  return Status::Ok();
}

// ---- rings ----

uint16_t FakeDriver::UsedIdx(const Ring& r) const { return Load16(mem_ + r.used + 2); }
uint16_t FakeDriver::tx_used_idx() const { return UsedIdx(tx_); }
uint16_t FakeDriver::rx_avail_idx() const { return rx_.avail_idx; }

void FakeDriver::WriteDesc(Ring& r, uint16_t i, uint64_t gpa, uint32_t len, uint16_t flags, uint16_t next) {
  uint8_t* d = At(r.desc + 16ull * i);
  std::memcpy(d, &gpa, 8);
  std::memcpy(d + 8, &len, 4);
  std::memcpy(d + 12, &flags, 2);
  std::memcpy(d + 14, &next, 2);
}

void FakeDriver::Kick(Ring& r, uint16_t old_idx) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool kick = true;
  if (acked_ & kEventIdx) {
    uint16_t avail_event = Load16(At(r.used + 4 + 8ull * opt_.queue_size));
    kick = NeedEvent(avail_event, r.avail_idx, old_idx);
  }
  if (kick) {
    uint64_t one = 1;
    (void)!::write(r.kick.get(), &one, sizeof one);
  }
}

void FakeDriver::PublishAvail(Ring& r, uint16_t head) {
  uint8_t* slot = At(r.avail + 4 + 2ull * (r.avail_idx % opt_.queue_size));
  std::memcpy(slot, &head, 2);
  uint16_t old = r.avail_idx;
  ++r.avail_idx;
  Store16(At(r.avail + 2), r.avail_idx);
  Kick(r, old);
}

bool FakeDriver::WaitCall(Ring& r, std::chrono::steady_clock::time_point deadline) {
  // Ask for an interrupt at the next used entry, then re-check before sleeping.
  Store16(At(r.avail + 4 + 2ull * opt_.queue_size), r.last_used);  // used_event
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (UsedIdx(r) != r.last_used) return true;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0 || !WaitFd(r.call.get(), POLLIN, left, "interrupt").ok()) return false;
  uint64_t v;
  (void)!::read(r.call.get(), &v, sizeof v);
  return true;
}

void FakeDriver::PostRxBuffers() {
  uint16_t old = rx_.avail_idx;
  for (size_t i = 0; i < rx_posted_.size(); ++i) {
    if (rx_posted_[i]) continue;
    uint64_t buf = opt_.gpa_base + rx_bufs_ + uint64_t{rx_stride_} * i;
    uint16_t head;
    if (opt_.rx_split_header) {
      head = static_cast<uint16_t>(2 * i);
      WriteDesc(rx_, head, buf, kPacketHeaderSize, kDescWrite | kDescNext, static_cast<uint16_t>(head + 1));
      WriteDesc(rx_, static_cast<uint16_t>(head + 1), buf + kPacketHeaderSize, opt_.rx_buf_size, kDescWrite, 0);
    } else {
      head = static_cast<uint16_t>(i);
      WriteDesc(rx_, head, buf, static_cast<uint32_t>(kPacketHeaderSize + opt_.rx_buf_size), kDescWrite, 0);
    }
    std::memcpy(At(rx_.avail + 4 + 2ull * (rx_.avail_idx % opt_.queue_size)), &head, 2);
    ++rx_.avail_idx;
    rx_posted_[i] = true;
  }
  if (rx_.avail_idx == old) return;
  Store16(At(rx_.avail + 2), rx_.avail_idx);
  Kick(rx_, old);
}

bool FakeDriver::RxPending() { return UsedIdx(rx_) != rx_.last_used; }

Result<RxPacket> FakeDriver::Receive(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (UsedIdx(rx_) == rx_.last_used) {
    if (!WaitCall(rx_, deadline)) return DeadlineExceeded("no rx packet within " + std::to_string(timeout.count()) + " ms");
  }
  const uint8_t* e = At(rx_.used + 4 + 8ull * (rx_.last_used % opt_.queue_size));
  uint32_t id, len;
  std::memcpy(&id, e, 4);
  std::memcpy(&len, e + 4, 4);
  ++rx_.last_used;
  size_t buf = opt_.rx_split_header ? id / 2 : id;
  if (buf >= rx_posted_.size()) return Internal("rx used id out of range");
  rx_posted_[buf] = false;
  const uint8_t* p = At(rx_bufs_ + uint64_t{rx_stride_} * buf);
  RxPacket pkt;
  pkt.used_len = len;
  if (len >= kPacketHeaderSize) {
    pkt.hdr = DecodeHeader(p);
    size_t n = std::min<size_t>(pkt.hdr.len, len - kPacketHeaderSize);
    pkt.payload.assign(reinterpret_cast<const char*>(p + kPacketHeaderSize), n);
  }
  if (opt_.auto_repost_rx) PostRxBuffers();
  return pkt;
}

uint64_t FakeDriver::AllocTx(size_t bytes) {
  bytes = (bytes + 15) & ~size_t{15};
  if (tx_next_ + bytes > opt_.mem_size) {
    // Reuse the area only once the device has returned every chain in it.
    (void)WaitTxDrained();
    tx_next_ = tx_area_;
  }
  uint64_t gpa = opt_.gpa_base + tx_next_;
  tx_next_ += bytes;
  return gpa;
}

size_t FakeDriver::ReclaimTx() {
  size_t n = 0;
  while (UsedIdx(tx_) != tx_.last_used) {
    const uint8_t* e = At(tx_.used + 4 + 8ull * (tx_.last_used % opt_.queue_size));
    uint32_t id;
    std::memcpy(&id, e, 4);
    ++tx_.last_used;
    auto it = tx_chains_.find(static_cast<uint16_t>(id));
    if (it != tx_chains_.end()) {
      tx_free_.insert(tx_free_.end(), it->second.begin(), it->second.end());
      tx_chains_.erase(it);
    }
    ++n;
  }
  return n;
}

Status FakeDriver::WaitTxDrained(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ReclaimTx();
    if (tx_.last_used == tx_.avail_idx) return Status::Ok();
    if (!WaitCall(tx_, deadline)) return DeadlineExceeded("tx chains not returned in time");
  }
}

void FakeDriver::PublishTxChain(const std::vector<Desc>& descs) {
  ReclaimTx();
  std::vector<uint16_t> ids;
  for (size_t i = 0; i < descs.size() && !tx_free_.empty(); ++i) {
    ids.push_back(tx_free_.back());
    tx_free_.pop_back();
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const Desc& d = descs[i];
    bool last = i + 1 == ids.size();
    uint16_t next = d.loop_to_head ? ids[0] : d.next ? *d.next : (last ? 0 : ids[i + 1]);
    uint16_t flags = d.flags | ((!last || d.next || d.loop_to_head) ? kDescNext : 0);
    WriteDesc(tx_, ids[i], d.gpa, d.len, flags, next);
  }
  tx_chains_[ids[0]] = ids;
  PublishAvail(tx_, ids[0]);
}

void FakeDriver::PublishTxHead(uint16_t head) { PublishAvail(tx_, head); }

void FakeDriver::BumpTxAvailIdx(uint16_t delta) {
  uint16_t old = tx_.avail_idx;
  tx_.avail_idx = static_cast<uint16_t>(tx_.avail_idx + delta);
  Store16(At(tx_.avail + 2), tx_.avail_idx);
  Kick(tx_, old);
}

Status FakeDriver::SendPacket(const PacketHeader& h, std::string_view payload) {
  PacketHeader hh = h;
  hh.len = static_cast<uint32_t>(payload.size());
  uint64_t hdr = AllocTx(kPacketHeaderSize);
  EncodeHeader(hh, Host(hdr));
  std::vector<Desc> chain{{hdr, static_cast<uint32_t>(kPacketHeaderSize)}};
  if (!payload.empty()) {
    uint64_t data = AllocTx(payload.size());
    std::memcpy(Host(data), payload.data(), payload.size());
    chain.emplace_back(data, static_cast<uint32_t>(payload.size()));
  }
  ReclaimTx();
  if (tx_free_.size() < chain.size()) {
    RETURN_IF_ERROR(WaitTxDrained());
  }
  PublishTxChain(chain);
  return Status::Ok();
}

}  // namespace capsule::vsock::testing
