// Building blocks of the back end in isolation: guest memory translation,
// the packet codec and chain validation, vhost-user payload decoders, the
// event loop and the guest->host byte queue.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "runtime/vsock/byte_queue.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/guest_memory.h"
#include "runtime/vsock/vhost_user_protocol.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_packet.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock {
namespace {

TEST(GuestMemoryTest, TranslatesOnlyWithinRegions) {
  std::vector<uint8_t> buf(4096);
  auto mem = GuestMemory::FromBuffer(buf.data(), {0x1000, 4096, 0x7000, 0});
  EXPECT_EQ(mem->GpaToHost(0x1000, 4096), buf.data());
  EXPECT_EQ(mem->GpaToHost(0x1ff0, 16), buf.data() + 0xff0);
  EXPECT_EQ(mem->GpaToHost(0x1ff0, 17), nullptr);
  EXPECT_EQ(mem->GpaToHost(0xfff, 1), nullptr);
  EXPECT_EQ(mem->GpaToHost(~0ULL, 2), nullptr);
  EXPECT_EQ(mem->UvaToHost(0x7010, 8), buf.data() + 0x10);
  EXPECT_EQ(mem->UvaToHost(0x1010, 8), nullptr) << "guest addresses are not user addresses";
  std::vector<iovec> iov;
  EXPECT_FALSE(mem->GpaToIovecs(0x1800, 0x1000, &iov));
  EXPECT_TRUE(iov.empty());
  EXPECT_TRUE(mem->GpaToIovecs(0x1800, 0x800, &iov));
  ASSERT_EQ(iov.size(), 1u);
  EXPECT_EQ(iov[0].iov_len, 0x800u);
}

TEST(GuestMemoryTest, MapRejectsBadTables) {
  EXPECT_FALSE(GuestMemory::Map({}, {}).ok());
  std::vector<UniqueFd> fds;
  fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  auto r = GuestMemory::Map({{0, 0, 0, 0}}, std::move(fds));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("region 0"), std::string::npos) << r.status().message();
  std::vector<UniqueFd> none;
  EXPECT_FALSE(GuestMemory::Map({{0, 4096, 0, 0}}, std::move(none)).ok());
}

TEST(GuestMemoryTest, MapRefusesARegionPastTheEndOfItsFile) {
  // Found by vsock_fuzzer (mode 3): such a region mapped fine and the first
  // ring access past the file's end killed capsule-vsockd with SIGBUS.
  auto memfd = [](off_t size) {
    UniqueFd fd(::memfd_create("guest-ram-test", MFD_CLOEXEC));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(::ftruncate(fd.get(), size), 0);
    std::vector<UniqueFd> fds;
    fds.push_back(std::move(fd));
    return fds;
  };
  auto past = GuestMemory::Map({{0, 8192, 0x7000, 0}}, memfd(4096));
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("past the end of its file"), std::string::npos) << past.status().message();
  EXPECT_FALSE(GuestMemory::Map({{0, 4096, 0x7000, 4096}}, memfd(4096)).ok());
  auto fits = GuestMemory::Map({{0, 4096, 0x7000, 4096}}, memfd(8192));
  ASSERT_OK(fits);
  EXPECT_NE((*fits)->GpaToHost(0xff0, 16), nullptr);
}

TEST(VsockPacketTest, HeaderRoundTripsInLittleEndian) {
  PacketHeader h;
  h.src_cid = 0x0102030405060708;
  h.dst_cid = 2;
  h.src_port = 1024;
  h.dst_port = 0xdeadbeef;
  h.len = 5;
  h.op = static_cast<uint16_t>(Op::kRw);
  h.flags = 3;
  h.buf_alloc = 262144;
  h.fwd_cnt = 77;
  uint8_t raw[kPacketHeaderSize];
  EncodeHeader(h, raw);
  EXPECT_EQ(raw[0], 0x08);
  EXPECT_EQ(raw[28], 1) << "type at offset 28";
  EXPECT_EQ(raw[30], 5) << "op at offset 30";
  PacketHeader back = DecodeHeader(raw);
  EXPECT_EQ(back.src_cid, h.src_cid);
  EXPECT_EQ(back.dst_port, h.dst_port);
  EXPECT_EQ(back.fwd_cnt, 77u);
  EXPECT_EQ(back.ToString(), "RW 72623859790382856:1024 -> 2:3735928559 len=5 type=1 flags=3 buf_alloc=262144 fwd_cnt=77");
}

TEST(VsockPacketTest, ParseTxPacketValidatesTheChain) {
  uint8_t hdr[kPacketHeaderSize];
  PacketHeader h;
  h.len = 4;
  EncodeHeader(h, hdr);
  char data[] = "abcdXYZ";
  DescChain c;
  c.readable = {{hdr, 20}, {hdr + 20, 24}, {data, 7}};
  c.readable_len = 51;
  auto p = ParseTxPacket(c);
  ASSERT_OK(p);
  ASSERT_EQ(p->payload.size(), 1u);
  EXPECT_EQ(p->payload[0].iov_len, 4u) << "payload clipped to hdr.len";
  c.readable_len = 40;
  EXPECT_FALSE(ParseTxPacket(c).ok());
  c.readable_len = 51;
  c.writable = {{data, 1}};
  EXPECT_FALSE(ParseTxPacket(c).ok());
  c.writable.clear();
  h.len = 8;
  EncodeHeader(h, hdr);
  auto too_long = ParseTxPacket(c);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("len 8"), std::string::npos);
}

TEST(VsockPacketTest, RxHeaderAndPayloadSpanDescriptors) {
  std::vector<uint8_t> a(30), b(100);
  DescChain c;
  c.writable = {{a.data(), a.size()}, {b.data(), b.size()}};
  c.writable_len = 130;
  PacketHeader h;
  h.op = static_cast<uint16_t>(Op::kRw);
  h.fwd_cnt = 9;
  ASSERT_TRUE(WriteRxHeader(c, h));
  uint8_t raw[kPacketHeaderSize];
  GatherBytes(c.writable, 0, raw, kPacketHeaderSize);
  EXPECT_EQ(DecodeHeader(raw).fwd_cnt, 9u);
  EXPECT_EQ(CopyToRxPayload(c, std::string(200, 'z')), 130u - kPacketHeaderSize);
  EXPECT_EQ(b[14], 'z');
  DescChain tiny;
  tiny.writable_len = 43;
  EXPECT_FALSE(WriteRxHeader(tiny, h));
}

TEST(VirtqueueTest, SizeMustBeAPowerOfTwo) {
  Virtqueue q;
  EXPECT_OK(q.SetSize(256));
  EXPECT_OK(q.SetSize(32768));
  EXPECT_FALSE(q.SetSize(0).ok());
  EXPECT_FALSE(q.SetSize(100).ok());
  EXPECT_FALSE(q.SetSize(65536).ok());
}

TEST(VhostUserProtocolTest, HeaderChecksVersionAndSize) {
  std::vector<uint8_t> raw = vhost_user::EncodeHeader({1, 1, 0});
  EXPECT_OK(vhost_user::DecodeHeader(raw.data(), raw.size()));
  EXPECT_FALSE(vhost_user::DecodeHeader(raw.data(), 11).ok());
  raw = vhost_user::EncodeHeader({1, 2, 0});
  auto bad = vhost_user::DecodeHeader(raw.data(), raw.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GET_FEATURES"), std::string::npos) << bad.status().message();
  raw = vhost_user::EncodeHeader({1, 1, 5000});
  EXPECT_FALSE(vhost_user::DecodeHeader(raw.data(), raw.size()).ok());
}

TEST(VhostUserProtocolTest, MemTableNeedsOneFdPerRegion) {
  vhost_user::Message m;
  m.hdr.request = static_cast<uint32_t>(vhost_user::Request::kSetMemTable);
  m.payload.assign(8 + 2 * 32, 0);
  uint32_t two = 2;
  std::memcpy(m.payload.data(), &two, 4);
  std::vector<UniqueFd> fds;
  auto r = vhost_user::DecodeMemTable(m, &fds);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2 regions but 0 fds"), std::string::npos) << r.status().message();
  m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  auto ok = vhost_user::DecodeMemTable(m, &fds);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_EQ(fds.size(), 2u);
  m.payload.resize(8 + 32);
  EXPECT_FALSE(vhost_user::DecodeMemTable(m, &fds).ok()) << "size disagrees with the count";
}

TEST(VhostUserProtocolTest, ConfigAccessStaysWithinTheConfigSpace) {
  vhost_user::Message m;
  m.hdr.request = static_cast<uint32_t>(vhost_user::Request::kGetConfig);
  m.payload = vhost_user::EncodeConfig(0, 0, std::vector<uint8_t>(8));
  EXPECT_OK(vhost_user::DecodeConfig(m, false));
  m.payload = vhost_user::EncodeConfig(250, 0, std::vector<uint8_t>(8));
  EXPECT_FALSE(vhost_user::DecodeConfig(m, false).ok());
  m.payload.resize(15);
  EXPECT_FALSE(vhost_user::DecodeConfig(m, false).ok());
}

TEST(EventLoopTest, DispatchesFdsTimersAndPostedWork) {
  auto loop = EventLoop::Create();
  ASSERT_OK(loop);
  UniqueFd ev(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int fired = 0;
  ASSERT_TRUE((*loop)->Add(ev.get(), EPOLLIN, [&](uint32_t) {
    uint64_t v;
    (void)!::read(ev.get(), &v, sizeof v);
    ++fired;
    (*loop)->Remove(ev.get());  // removing itself mid-dispatch is allowed
  }).ok());
  EXPECT_FALSE((*loop)->Add(ev.get(), EPOLLIN, [](uint32_t) {}).ok()) << "one handler per fd";
  uint64_t one = 1;
  ASSERT_EQ(::write(ev.get(), &one, sizeof one), 8);
  bool timer = false, cancelled = false, posted = false;
  (*loop)->AddTimer(EventLoop::Clock::now(), [&] { timer = true; });
  auto id = (*loop)->AddTimer(EventLoop::Clock::now(), [&] { cancelled = true; });
  (*loop)->CancelTimer(id);
  (*loop)->Post([&] { posted = true; });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*loop)->RunOnce(std::chrono::milliseconds(100)).ok());
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(timer);
  EXPECT_FALSE(cancelled);
  EXPECT_TRUE(posted);
  EXPECT_FALSE((*loop)->Watching(ev.get()));
}

TEST(ByteQueueTest, KeepsOrderAcrossPartialConsumption) {
  ByteQueue q;
  std::string a(100000, 'a'), b = "tail";
  q.Append({{a.data(), a.size()}});
  q.Append(b);
  q.Consume(99998);
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(q.data()), q.size()), "aatail");
  q.Consume(100);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace capsule::vsock
