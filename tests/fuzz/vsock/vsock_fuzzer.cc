// libFuzzer target for everything in the vsock back end a guest or a front
// end controls. The first input byte picks a mode:
//  0  vhost-user bytes fed to a real VhostUserServer + VsockDevice over a
//     socketpair (framing, decoders, dispatch, error replies);
//  1  split-ring memory: a fuzzed descriptor table / avail ring popped by a
//     Virtqueue, chains parsed as tx packets and filled as rx buffers;
//  2  the connection state machine: fuzzed guest packets, host socket
//     writes/reads/closes and rx fills against two live connections, with
//     the invariants a guest relies on checked after every step.
// Without CAPSULE_FUZZ the file builds with a main() that replays seed files.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/vhost_user_server.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_device.h"
#include "runtime/vsock/vsock_muxer.h"
#include "runtime/vsock/vsock_packet.h"

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

void FuzzVhostUser(Input in) {
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  VsockDevice dev(**loop, {3, kNowhere});
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd ours(sv[0]);
  auto server = VhostUserServer::Serve(**loop, UniqueFd(sv[1]), dev, nullptr);
  if (!server.ok()) return;
  while (!in.empty() && (*server)->connected()) {
    std::string chunk = in.Bytes(512);
    if (::send(ours.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
    (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
    char sink[4096];
    while (::recv(ours.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    capsule::log::SetLevel(capsule::log::Level::kError);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  capsule::vsock::Input in(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: capsule::vsock::FuzzVhostUser(in); break;
    case 1: capsule::vsock::FuzzVirtqueue(in); break;
    default: capsule::vsock::FuzzConnections(in); break;
  }
  return 0;
}
