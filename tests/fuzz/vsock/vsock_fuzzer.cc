// libFuzzer target for everything in the vsock back end a guest or a front
// end controls. The first input byte picks a mode:
//  0  vhost-user bytes fed to a real VhostUserServer + VsockDevice over a
//     socketpair (framing, decoders, dispatch, error replies);
//  1  split-ring memory: a fuzzed descriptor table / avail ring popped by a
//     Virtqueue, chains parsed as tx packets and filled as rx buffers;
//  2  the connection state machine: fuzzed guest packets, host socket
//     writes/reads/closes and rx fills against two live connections, with
//     the invariants a guest relies on checked after every step;
//  3  vhost-user messages built from the input with the fds QEMU passes
//     (eventfds for SET_VRING_KICK/CALL/ERR, a memfd as guest RAM for
//     SET_MEM_TABLE), kicks on those eventfds and writes into that RAM: the
//     way from a front end's memory table to the device touching memory;
//  4  the serial vsock: a guest's bytes on a VsockStreamLink, cut at fuzzed
//     points, with two host streams open; every frame the link sends back
//     must be a whole packet from the host to the guest.
// In modes 0 and 3 every reply the back end sends is checked: version 1
// with the reply flag, and the payload its request allows.
// Without CAPSULE_FUZZ the file builds with a main() that replays seed files.
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/vhost_user_protocol.h"
#include "runtime/vsock/vhost_user_server.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_device.h"
#include "runtime/vsock/vsock_muxer.h"
#include "runtime/vsock/vsock_packet.h"
#include "runtime/vsock/stream_link.h"

namespace capsule::vsock {
namespace {

// Guest->host connects go here and fail (ENOENT): answered with RST.
constexpr const char* kNowhere = "/nonexistent-capsule-fuzz/vsock.sock";

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return n_ == 0; }
  template <typename T>
  T Take() {
    T v{};
    size_t k = std::min(sizeof v, n_);
    std::memcpy(&v, d_, k);
    d_ += k;
    n_ -= k;
    return v;
  }
  std::string Bytes(size_t max) {
    size_t k = std::min(max, n_);
    std::string s(reinterpret_cast<const char*>(d_), k);
    d_ += k;
    n_ -= k;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "vsock_fuzzer invariant broken: %s\n", what);
    std::abort();
  }
}

// Reads what the back end replied and checks each complete reply.
class ReplyChecker {
 public:
  void Drain(int fd) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) pending_.append(buf, static_cast<size_t>(n));
    while (pending_.size() >= vhost_user::kHeaderSize) {
      uint32_t request, flags, size;
      std::memcpy(&request, pending_.data(), 4);
      std::memcpy(&flags, pending_.data() + 4, 4);
      std::memcpy(&size, pending_.data() + 8, 4);
      Check(flags == (vhost_user::kVersion | vhost_user::kReplyFlag), "reply without version 1 and the reply flag");
      Check(size <= vhost_user::kMaxPayloadSize, "reply payload above the protocol's maximum");
      if (pending_.size() < vhost_user::kHeaderSize + size) return;
      CheckPayload(request, std::string_view(pending_).substr(vhost_user::kHeaderSize, size));
      pending_.erase(0, vhost_user::kHeaderSize + size);
    }
  }

 private:
  static void CheckPayload(uint32_t request, std::string_view payload) {
    using vhost_user::Request;
    switch (static_cast<Request>(request)) {
      case Request::kGetFeatures:
      case Request::kGetProtocolFeatures:
      case Request::kGetQueueNum:
      case Request::kGetVringBase:
        // A value, or nothing when the request failed.
        Check(payload.empty() || payload.size() == 8, "GET_* reply is neither empty nor a u64");
        return;
      case Request::kGetConfig:
        Check(payload.empty() || (payload.size() >= 12 && payload.size() <= 12 + vhost_user::kMaxConfigSize),
              "GET_CONFIG reply of a size no config access has");
        return;
      default: {
        // REPLY_ACK: a u64, 0 for success.
        Check(payload.size() == 8, "REPLY_ACK is not a u64");
        uint64_t v;
        std::memcpy(&v, payload.data(), 8);
        Check(v <= 1, "REPLY_ACK neither 0 nor 1");
      }
    }
  }

  std::string pending_;
};

void FuzzVhostUser(Input in) {
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  VsockDevice dev(**loop, {3, kNowhere});
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd ours(sv[0]);
  auto server = VhostUserServer::Serve(**loop, UniqueFd(sv[1]), dev, nullptr);
  if (!server.ok()) return;
  ReplyChecker replies;
  while (!in.empty() && (*server)->connected()) {
    std::string chunk = in.Bytes(512);
    if (::send(ours.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
    (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
    replies.Drain(ours.get());
  }
}

// Sends `bytes` with `fds` attached (SCM_RIGHTS), as QEMU does.
bool SendWithFds(int sock, const std::string& bytes, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 2)];
  if (!fds.empty()) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes.size());
}

// Mode 3's input: a list of steps, each a byte whose low two bits pick
//  0  a message: request (u8), payload length (u16 % 512), payload; bit 2
//     asks for a reply, bit 3 attaches a new eventfd, bit 4 a new memfd of
//     (u8 + 1) pages that becomes the RAM steps 2 write;
//  1  a kick: an eventfd sent earlier (u8 picks it) is written;
//  2  a write into the RAM: offset (u32, modulo its size), length (u8), bytes;
//  3  raw bytes (length u8) on the socket, no fds.
void FuzzVhostUserWithFds(Input in) {
  constexpr size_t kPage = 4096;
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  VsockDevice dev(**loop, {3, kNowhere});
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd ours(sv[0]);
  auto server = VhostUserServer::Serve(**loop, UniqueFd(sv[1]), dev, nullptr);
  if (!server.ok()) return;
  ReplyChecker replies;
  std::vector<UniqueFd> eventfds;  // our ends of every eventfd passed
  UniqueFd ram;
  size_t ram_size = 0;
  while (!in.empty() && (*server)->connected()) {
    const uint8_t step = in.Take<uint8_t>();
    switch (step & 3) {
      case 0: {
        vhost_user::Header h;
        h.request = in.Take<uint8_t>();
        h.flags = vhost_user::kVersion | ((step & 4) ? vhost_user::kNeedReplyFlag : 0);
        std::string payload = in.Bytes(in.Take<uint16_t>() % 512);
        h.size = static_cast<uint32_t>(payload.size());
        std::vector<uint8_t> head = vhost_user::EncodeHeader(h);
        std::string bytes(head.begin(), head.end());
        bytes += payload;
        std::vector<int> fds;
        if (step & 8) {
          eventfds.emplace_back(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
          if (eventfds.back()) fds.push_back(eventfds.back().get());
        }
        if (step & 16) {
          size_t size = (in.Take<uint8_t>() + 1u) * kPage;
          UniqueFd m(::memfd_create("capsule-fuzz-ram", MFD_CLOEXEC));
          if (m && ::ftruncate(m.get(), static_cast<off_t>(size)) == 0) {
            ram = std::move(m);
            ram_size = size;
            fds.push_back(ram.get());
          }
        }
        if (!SendWithFds(ours.get(), bytes, fds)) return;
        break;
      }
      case 1: {
        uint8_t pick = in.Take<uint8_t>();
        if (!eventfds.empty() && eventfds[pick % eventfds.size()]) {
          uint64_t one = 1;
          (void)!::write(eventfds[pick % eventfds.size()].get(), &one, sizeof one);
        }
        break;
      }
      case 2: {
        uint32_t off = in.Take<uint32_t>();
        std::string bytes = in.Bytes(in.Take<uint8_t>());
        if (ram && ram_size > 0) {
          off %= ram_size;
          size_t n = std::min(bytes.size(), ram_size - off);
          (void)!::pwrite(ram.get(), bytes.data(), n, off);
        }
        break;
      }
      default: {
        std::string bytes = in.Bytes(in.Take<uint8_t>());
        if (::send(ours.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return;
      }
    }
    for (int i = 0; i < 3; ++i) (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
    replies.Drain(ours.get());
  }
}

void FuzzVirtqueue(Input in) {
  constexpr uint64_t kBase = 0x10000;
  constexpr size_t kMem = 64 * 1024;
  std::vector<uint8_t> mem(kMem);
  uint8_t shape = in.Take<uint8_t>();
  for (size_t i = 0; i < kMem && !in.empty(); ++i) mem[i] = in.Take<uint8_t>();
  auto gm = GuestMemory::FromBuffer(mem.data(), {kBase, kMem, 0x7000000, 0});
  Virtqueue q;
  if (!q.SetSize(1u << (shape % 7)).ok()) return;  // 1..64
  q.SetEventIdx(shape & 0x80);
  if (!q.ResolveGpa(gm.get(), kBase, kBase + 0x1000, kBase + 0x2000).ok()) return;
  q.set_call(UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)));
  q.set_started(true);
  q.set_enabled(true);
  for (int i = 0; i < 256; ++i) {
    PopResult p = q.Pop();
    if (!p.chain) {
      if (!p.error.empty()) continue;
      break;
    }
    const DescChain& c = *p.chain;
    for (const auto* list : {&c.readable, &c.writable})
      for (const iovec& v : *list) {
        auto* b = static_cast<const uint8_t*>(v.iov_base);
        Check(b >= mem.data() && b + v.iov_len <= mem.data() + kMem, "iovec outside guest memory");
      }
    auto pkt = ParseTxPacket(c);
    if (pkt.ok()) {
      size_t total = 0;
      for (const iovec& v : pkt->payload) total += v.iov_len;
      Check(total == pkt->hdr.len, "payload iovecs differ from hdr.len");
    }
    if (WriteRxHeader(c, PacketHeader{})) (void)CopyToRxPayload(c, "fuzz payload");
    q.PushUsed(c.head, 0);
  }
  (void)q.NotifyIfNeeded();
  (void)q.ArmKickAndRecheck();
}

struct HostEnd {
  UniqueFd fd;
  uint32_t guest_port;
};

void FuzzConnections(Input in) {
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  VsockMuxer mux(**loop, {3, kNowhere}, [] {});
  mux.set_guest_ready(true);
  std::vector<HostEnd> hosts;
  for (uint32_t port : {1024u, 1025u}) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return;
    mux.ConnectToGuest(UniqueFd(sv[0]), port);
    hosts.push_back({UniqueFd(sv[1]), port});
  }
  std::vector<uint8_t> rxbuf(70 * 1024);
  std::string payload(kMaxPacketPayload, 'p');
  while (!in.empty()) {
    uint8_t step = in.Take<uint8_t>();
    HostEnd& h = hosts[step >> 7];
    uint32_t local = kFirstLocalPort + (step >> 7);
    switch (step % 6) {
      case 0: {  // a guest packet for one of the connections (or a near miss)
        TxPacket pkt;
        pkt.hdr.src_cid = 3;
        pkt.hdr.dst_cid = kHostCid;
        pkt.hdr.src_port = h.guest_port + (in.Take<uint8_t>() & 1);
        pkt.hdr.dst_port = local;
        pkt.hdr.op = in.Take<uint8_t>() % 9;
        pkt.hdr.type = (in.Take<uint8_t>() & 0x10) ? kTypeSeqpacket : kTypeStream;
        pkt.hdr.flags = in.Take<uint8_t>();
        pkt.hdr.buf_alloc = in.Take<uint32_t>();
        pkt.hdr.fwd_cnt = in.Take<uint32_t>();
        pkt.hdr.len = in.Take<uint16_t>() % (kMaxPacketPayload + 1);
        pkt.payload = {{payload.data(), pkt.hdr.len}};
        mux.OnGuestPacket(pkt);
        break;
      }
      case 1: {  // the host writes
        std::string data = in.Bytes(in.Take<uint8_t>() * 64u);
        if (h.fd) (void)::send(h.fd.get(), data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        break;
      }
      case 2: {  // the host reads
        char sink[65536];
        if (h.fd) (void)::recv(h.fd.get(), sink, sizeof sink, MSG_DONTWAIT);
        break;
      }
      case 3:  // the host half-closes or closes
        if (h.fd && (step & 0x40)) {
          ::shutdown(h.fd.get(), SHUT_WR);
        } else {
          h.fd.reset();
        }
        break;
      case 4: {  // the guest offers an rx buffer
        size_t size = 1 + in.Take<uint16_t>() % rxbuf.size();
        DescChain c;
        c.writable = {{rxbuf.data(), size}};
        c.writable_len = size;
        uint32_t n = mux.FillRx(c);
        Check(n == 0 || n >= kPacketHeaderSize, "rx packet shorter than a header");
        Check(n <= size, "rx packet overflows the buffer");
        if (n > 0) {
          PacketHeader hdr = DecodeHeader(rxbuf.data());
          Check(hdr.len == n - kPacketHeaderSize, "rx hdr.len disagrees with the used length");
          Check(hdr.len <= kMaxPacketPayload, "rx packet above the maximum payload");
          Check(hdr.src_cid == kHostCid && hdr.dst_cid == 3, "rx packet addresses");
        }
        break;
      }
      default:
        (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
    }
  }
}

}  // namespace
}  // namespace capsule::vsock

namespace capsule::vsock {
namespace {

// Checks each whole frame the link wrote for the guest.
void CheckFrames(std::string& pending) {
  while (pending.size() >= kPacketHeaderSize) {
    PacketHeader h = DecodeHeader(reinterpret_cast<const uint8_t*>(pending.data()));
    Check(h.len <= kMaxPacketPayload, "a frame to the guest longer than a packet");
    Check(h.src_cid == kHostCid && h.dst_cid == 3, "a frame to the guest with other CIDs");
    Check(h.type == kTypeStream || h.op == static_cast<uint16_t>(Op::kRst), "a non-stream frame that is not an RST");
    if (pending.size() < kPacketHeaderSize + h.len) return;
    pending.erase(0, kPacketHeaderSize + h.len);
  }
}

void FuzzStreamLink(Input in) {
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return;
  UniqueFd guest(sv[1]);
  VsockMuxer::Options o;
  o.peer_cid = 3;
  o.uds_path = kNowhere;
  bool lost = false;
  auto link = VsockStreamLink::Start(**loop, UniqueFd(sv[0]), o, [&lost](const Status&) { lost = true; });
  if (!link.ok()) return;
  std::vector<UniqueFd> hosts;
  for (uint32_t port : {1024u, 1025u}) {
    int hp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, hp) != 0) return;
    (*link)->muxer().ConnectToGuest(UniqueFd(hp[0]), port);
    hosts.emplace_back(hp[1]);
  }
  std::string from_link;
  while (!in.empty() && !lost) {
    std::string chunk = in.Bytes(1 + in.Take<uint8_t>() % 200);
    if (!chunk.empty() && chunk[0] == '\xff' && !hosts.empty()) {
      // Now and then a host writes, so rx work competes with the input.
      (void)::send(hosts.front().get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      (void)::send(guest.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(guest.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) from_link.append(buf, static_cast<size_t>(n));
    CheckFrames(from_link);
  }
  (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace capsule::vsock

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    capsule::log::SetLevel(capsule::log::Level::kError);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  capsule::vsock::Input in(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0: capsule::vsock::FuzzVhostUser(in); break;
    case 1: capsule::vsock::FuzzVirtqueue(in); break;
    case 2: capsule::vsock::FuzzConnections(in); break;
    case 4: capsule::vsock::FuzzStreamLink(in); break;
    default: capsule::vsock::FuzzVhostUserWithFds(in); break;
  }
  return 0;
}
