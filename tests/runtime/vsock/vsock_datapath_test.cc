// The vsock data path end to end through the back end: host programs on the
// hybrid socket, the guest played by FakeDriver on real split rings in a
// memfd. Covers connection set-up both ways, refusals, credit flow control,
// shutdown, and rx starvation.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "runtime/common/unix_stream.h"
#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

struct Stream {
  UniqueFd host;
  uint32_t host_port = 0;
  uint32_t guest_port = 0;
};

class VsockDatapathTest : public ::testing::Test {
 protected:
  void Boot(VsockServiceOptions o = {}, FakeDriver::Options d = {}) {
    auto b = InProcessBackend::Start(o);
    ASSERT_OK(b);
    backend_ = std::move(*b);
    auto drv = FakeDriver::Connect(backend_->vhost_socket(), d);
    ASSERT_OK(drv);
    driver_ = std::move(*drv);
    ASSERT_OK(driver_->Realize());
    ASSERT_OK(driver_->Start());
  }

  RxPacket Next() {
    auto p = driver_->Receive();
    EXPECT_OK(p);
    return p.ok() ? *p : RxPacket{};
  }

  void Send(Op op, uint32_t guest_port, uint32_t host_port, std::string_view data = {},
            uint32_t buf_alloc = 256 * 1024, uint32_t fwd_cnt = 0) {
    ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, op, guest_port, host_port, buf_alloc, fwd_cnt), data));
  }

  // A hybrid CONNECT the guest accepts with `buf_alloc` of credit.
  Stream Establish(uint32_t guest_port, uint32_t buf_alloc = 256 * 1024, const std::string& extra = "") {
    Stream s;
    auto host = HostConnect(backend_->uds(), guest_port, extra);
    EXPECT_OK(host);
    if (!host.ok()) return s;
    s.host = std::move(*host);
    RxPacket req = Next();
    EXPECT_EQ(req.hdr.operation(), Op::kRequest) << req.hdr.ToString();
    EXPECT_EQ(req.hdr.src_cid, kHostCid);
    EXPECT_EQ(req.hdr.dst_cid, kGuestCid);
    EXPECT_EQ(req.hdr.dst_port, guest_port);
    EXPECT_GE(req.hdr.src_port, 1u << 30);
    EXPECT_EQ(req.hdr.buf_alloc, 256u * 1024);
    s.host_port = req.hdr.src_port;
    s.guest_port = guest_port;
    Send(Op::kResponse, guest_port, s.host_port, {}, buf_alloc);
    EXPECT_EQ(ReadLine(s.host.get()), "OK " + std::to_string(s.host_port) + "\n");
    return s;
  }

  // Receives RW packets for `s` until `n` bytes arrived, granting credit like
  // Linux does (an update once half the buffer was consumed).
  std::string ReceiveData(const Stream& s, size_t n, uint32_t buf_alloc = 256 * 1024) {
    std::string got;
    uint32_t fwd = 0, announced = 0;
    while (got.size() < n) {
      RxPacket p = Next();
      if (p.hdr.op == 0) break;
      if (p.hdr.operation() == Op::kCreditRequest) {
        Send(Op::kCreditUpdate, s.guest_port, s.host_port, {}, buf_alloc, fwd);
        continue;
      }
      EXPECT_EQ(p.hdr.operation(), Op::kRw) << p.hdr.ToString();
      EXPECT_EQ(p.hdr.dst_port, s.guest_port);
      got += p.payload;
      fwd += static_cast<uint32_t>(p.payload.size());
      if (fwd - announced >= buf_alloc / 2) {
        Send(Op::kCreditUpdate, s.guest_port, s.host_port, {}, buf_alloc, fwd);
        announced = fwd;
      }
    }
    return got;
  }

  // Sends Pattern(.., 2) bytes as a guest that honours our credit, until the
  // back end stops granting more because the host is not reading. Returns
  // the bytes sent.
  uint32_t FillBackEndCredit(const Stream& s);

  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<FakeDriver> driver_;
};

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return s;
}

uint32_t VsockDatapathTest::FillBackEndCredit(const Stream& s) {
  constexpr uint32_t kOurBuf = 256 * 1024;
  std::string all = Pattern(4 << 20, 2);
  uint32_t sent = 0, peer_fwd = 0;
  for (int rounds = 0; rounds < 1000; ++rounds) {
    uint32_t credit = kOurBuf - (sent - peer_fwd);
    if (credit == 0) return sent;
    uint32_t n = std::min<uint32_t>(credit, kMaxPacketPayload);
    Send(Op::kRw, s.guest_port, s.host_port, std::string_view(all).substr(sent, n));
    sent += n;
    // The answer to a CREDIT_REQUEST comes after anything queued before it.
    Send(Op::kCreditRequest, s.guest_port, s.host_port);
    for (;;) {
      RxPacket p = Next();
      EXPECT_EQ(p.hdr.operation(), Op::kCreditUpdate) << p.hdr.ToString();
      if (p.hdr.operation() != Op::kCreditUpdate) return sent;
      EXPECT_EQ(p.hdr.buf_alloc, kOurBuf);
      peer_fwd = p.hdr.fwd_cnt;
      if (!driver_->RxPending()) break;
    }
  }
  ADD_FAILURE() << "credit never ran out";
  return sent;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

TEST_F(VsockDatapathTest, HybridConnectCarriesDataBothWays) {
  Boot();
  Stream s = Establish(1024);
  WriteAll(s.host.get(), "hello guest");
  RxPacket p = Next();
  EXPECT_EQ(p.hdr.operation(), Op::kRw);
  EXPECT_EQ(p.payload, "hello guest");
  EXPECT_EQ(p.used_len, kPacketHeaderSize + 11);
  EXPECT_EQ(p.hdr.src_port, s.host_port);
  Send(Op::kRw, 1024, s.host_port, "hello host");
  EXPECT_EQ(ReadN(s.host.get(), 10), "hello host");
  EXPECT_EQ(backend_->connections(), 1u);
}

TEST_F(VsockDatapathTest, BytesPipelinedAfterTheConnectLineReachTheGuest) {
  Boot();
  Stream s = Establish(1024, 256 * 1024, "early bytes");
  RxPacket p = Next();
  EXPECT_EQ(p.hdr.operation(), Op::kRw);
  EXPECT_EQ(p.payload, "early bytes");
}

TEST_F(VsockDatapathTest, MalformedConnectLinesCloseTheClient) {
  Boot();
  for (const std::string& line : std::vector<std::string>{"HELLO\n", "CONNECT\n", "CONNECT abc\n", "CONNECT 99999999999\n", "CONNECT -1\n",
                           std::string(80, 'x')}) {
    auto fd = ConnectUnix(backend_->uds());
    ASSERT_OK(fd);
    WriteAll(fd->get(), line);
    EXPECT_TRUE(WaitEof(fd->get())) << line;
  }
  EXPECT_EQ(backend_->connections(), 0u);
  EXPECT_FALSE(driver_->RxPending()) << "no REQUEST reached the guest";
}

TEST_F(VsockDatapathTest, ConnectLineParsing) {
  EXPECT_EQ(ParseConnectLine("CONNECT 1024"), 1024u);
  EXPECT_EQ(ParseConnectLine("CONNECT 4294967295\r"), 4294967295u);
  EXPECT_EQ(ParseConnectLine("CONNECT  7 "), 7u);
  EXPECT_FALSE(ParseConnectLine("CONNECT 4294967296"));
  EXPECT_FALSE(ParseConnectLine("connect 1"));
  EXPECT_FALSE(ParseConnectLine("CONNECT 1x"));
  EXPECT_FALSE(ParseConnectLine(""));
}

TEST_F(VsockDatapathTest, ConnectBeforeTheDriverStartsFailsFast) {
  auto b = InProcessBackend::Start();
  ASSERT_OK(b);
  auto host = HostConnect((*b)->uds(), 1024);
  ASSERT_OK(host);
  EXPECT_TRUE(WaitEof(host->get()));
  EXPECT_EQ((*b)->connections(), 0u);
}

TEST_F(VsockDatapathTest, GuestRefusalClosesTheHostSocket) {
  Boot();
  auto host = HostConnect(backend_->uds(), 4000);
  ASSERT_OK(host);
  RxPacket req = Next();
  ASSERT_EQ(req.hdr.operation(), Op::kRequest);
  Send(Op::kRst, 4000, req.hdr.src_port);
  EXPECT_EQ(ReadN(host->get(), 3), "") << "EOF, no OK line";
  ASSERT_OK(driver_->WaitTxDrained());
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockDatapathTest, UnansweredRequestTimesOutAndResetsTheGuest) {
  VsockServiceOptions o;
  o.connect_timeout = std::chrono::milliseconds(100);
  Boot(o);
  auto host = HostConnect(backend_->uds(), 4001);
  ASSERT_OK(host);
  RxPacket req = Next();
  ASSERT_EQ(req.hdr.operation(), Op::kRequest);
  EXPECT_TRUE(WaitEof(host->get()));
  RxPacket rst = Next();
  EXPECT_EQ(rst.hdr.operation(), Op::kRst);
  EXPECT_EQ(rst.hdr.dst_port, 4001u);
  EXPECT_EQ(rst.hdr.src_port, req.hdr.src_port);
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockDatapathTest, GuestConnectsToAHostListener) {
  Boot();
  auto listener = ListenUnix(backend_->uds() + "_5000");
  ASSERT_OK(listener);
  Send(Op::kRequest, 7777, 5000, {}, 65536);
  RxPacket resp = Next();
  EXPECT_EQ(resp.hdr.operation(), Op::kResponse);
  EXPECT_EQ(resp.hdr.src_port, 5000u);
  EXPECT_EQ(resp.hdr.dst_port, 7777u);
  ASSERT_OK(WaitFd(listener->get(), POLLIN, kWait, "accept"));
  UniqueFd conn(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn);
  Send(Op::kRw, 7777, 5000, "from guest", 65536);
  EXPECT_EQ(ReadN(conn.get(), 10), "from guest");
  WriteAll(conn.get(), "from host");
  RxPacket p = Next();
  EXPECT_EQ(p.payload, "from host");
  EXPECT_EQ(p.hdr.dst_port, 7777u);
}

TEST_F(VsockDatapathTest, GuestConnectWithoutListenerIsReset) {
  Boot();
  Send(Op::kRequest, 7778, 6000);
  RxPacket rst = Next();
  EXPECT_EQ(rst.hdr.operation(), Op::kRst);
  EXPECT_EQ(rst.hdr.src_port, 6000u);
  EXPECT_EQ(rst.hdr.dst_port, 7778u);
  EXPECT_EQ(rst.hdr.dst_cid, kGuestCid);
}

TEST_F(VsockDatapathTest, PacketsWithoutAConnectionAreResetButRstsAreNot) {
  Boot();
  Send(Op::kRst, 10, 20);  // must not be answered
  Send(Op::kRw, 11, 21, "data");
  RxPacket p = Next();
  EXPECT_EQ(p.hdr.operation(), Op::kRst);
  EXPECT_EQ(p.hdr.dst_port, 11u) << "the first reply answers the RW, not the RST";
  Send(Op::kCreditRequest, 12, 22);
  EXPECT_EQ(Next().hdr.dst_port, 12u);
}

TEST_F(VsockDatapathTest, SpoofedOrMisroutedPacketsAreDropped) {
  Boot();
  PacketHeader spoofed = GuestPacket(99, Op::kRw, 10, 20);
  ASSERT_OK(driver_->SendPacket(spoofed, "x"));
  PacketHeader other_dst = GuestPacket(kGuestCid, Op::kRw, 10, 20);
  other_dst.dst_cid = 5;
  ASSERT_OK(driver_->SendPacket(other_dst, "x"));
  Send(Op::kRw, 13, 23, "marker");
  RxPacket p = Next();
  EXPECT_EQ(p.hdr.dst_port, 13u) << "no reply to the dropped packets";
}

TEST_F(VsockDatapathTest, NonStreamPacketsAreReset) {
  Boot();
  PacketHeader h = GuestPacket(kGuestCid, Op::kRequest, 10, 20);
  h.type = kTypeSeqpacket;
  ASSERT_OK(driver_->SendPacket(h));
  RxPacket p = Next();
  EXPECT_EQ(p.hdr.operation(), Op::kRst);
  EXPECT_EQ(p.hdr.type, kTypeSeqpacket);
}

TEST_F(VsockDatapathTest, GuestCreditLimitsHostToGuestData) {
  Boot();
  Stream s = Establish(1024, 8192);
  std::string data = Pattern(20000, 1);
  WriteAll(s.host.get(), data);
  std::string got;
  while (got.size() < 8192) {
    RxPacket p = Next();
    ASSERT_EQ(p.hdr.operation(), Op::kRw);
    got += p.payload;
  }
  EXPECT_EQ(got.size(), 8192u) << "never more than the guest's buf_alloc";
  RxPacket cr = Next();
  EXPECT_EQ(cr.hdr.operation(), Op::kCreditRequest) << "stalled back end asks for credit";
  EXPECT_FALSE(driver_->RxPending());
  Send(Op::kCreditUpdate, 1024, s.host_port, {}, 8192, 8192);
  while (got.size() < 16384) {
    RxPacket p = Next();
    ASSERT_EQ(p.hdr.operation(), Op::kRw) << p.hdr.ToString();
    got += p.payload;
  }
  EXPECT_EQ(got.size(), 16384u);
  Send(Op::kCreditUpdate, 1024, s.host_port, {}, 8192, 16384);
  while (got.size() < data.size()) {
    RxPacket p = Next();
    if (p.hdr.operation() == Op::kCreditRequest) continue;
    ASSERT_EQ(p.hdr.operation(), Op::kRw) << p.hdr.ToString();
    got += p.payload;
  }
  EXPECT_EQ(got, data);
}

TEST_F(VsockDatapathTest, BackEndAdvertisesCreditAndUpdatesItAsTheHostReads) {
  Boot();
  Stream s = Establish(1024);
  // The host does not read: the guest may send what fits the host socket
  // plus our 256 KiB buffer, then its credit runs out and stays out.
  uint32_t sent = FillBackEndCredit(s);
  EXPECT_GE(sent, 256u * 1024);
  Send(Op::kCreditRequest, 1024, s.host_port);
  EXPECT_EQ(Next().hdr.fwd_cnt, sent - 256 * 1024) << "exactly our buffer is held back";
  // Reading on the host frees the space; the back end tells the guest.
  EXPECT_EQ(ReadN(s.host.get(), sent), Pattern(sent, 2));
  RxPacket up = Next();
  EXPECT_EQ(up.hdr.operation(), Op::kCreditUpdate);
  EXPECT_EQ(up.hdr.buf_alloc, 256u * 1024);
  EXPECT_GT(up.hdr.fwd_cnt, sent - 256 * 1024) << "announces forwarded bytes";
  while (driver_->RxPending()) Next();
  Send(Op::kCreditRequest, 1024, s.host_port);
  RxPacket now = Next();
  EXPECT_EQ(now.hdr.operation(), Op::kCreditUpdate);
  EXPECT_EQ(now.hdr.fwd_cnt, sent);
}

TEST_F(VsockDatapathTest, GuestOverrunningItsCreditIsReset) {
  Boot();
  Stream s = Establish(1024);
  FillBackEndCredit(s);
  Send(Op::kRw, 1024, s.host_port, "1");  // one byte beyond the credit
  RxPacket rst = Next();
  EXPECT_EQ(rst.hdr.operation(), Op::kRst);
  EXPECT_EQ(rst.hdr.dst_port, 1024u);
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockDatapathTest, GuestShutdownSendHalfClosesTheHost) {
  Boot();
  Stream s = Establish(1024);
  Send(Op::kRw, 1024, s.host_port, "last words");
  Send(Op::kShutdown, 1024, s.host_port);
  Send(Op::kShutdown, 1024, s.host_port);  // flags 0: nothing changes
  PacketHeader sh = GuestPacket(kGuestCid, Op::kShutdown, 1024, s.host_port);
  sh.flags = kShutdownSend;
  ASSERT_OK(driver_->SendPacket(sh));
  EXPECT_EQ(ReadN(s.host.get(), 100), "last words") << "data, then EOF";
  WriteAll(s.host.get(), "reply");
  RxPacket p = Next();
  EXPECT_EQ(p.payload, "reply") << "the other direction still flows";
  sh.flags = kShutdownBoth;
  ASSERT_OK(driver_->SendPacket(sh));
  RxPacket rst = Next();
  EXPECT_EQ(rst.hdr.operation(), Op::kRst) << "full shutdown is acknowledged with RST";
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockDatapathTest, GuestCloseDeliversBufferedDataBeforeTheRst) {
  Boot();
  Stream s = Establish(1024);
  std::string data = Pattern(200 * 1024, 4);
  for (size_t off = 0; off < data.size(); off += kMaxPacketPayload)
    Send(Op::kRw, 1024, s.host_port, std::string_view(data).substr(off, kMaxPacketPayload));
  PacketHeader sh = GuestPacket(kGuestCid, Op::kShutdown, 1024, s.host_port);
  sh.flags = kShutdownBoth;
  ASSERT_OK(driver_->SendPacket(sh));
  EXPECT_EQ(ReadN(s.host.get(), data.size() + 1), data) << "all data, then EOF";
  RxPacket p = Next();
  while (p.hdr.operation() == Op::kCreditUpdate) p = Next();
  EXPECT_EQ(p.hdr.operation(), Op::kRst);
}

TEST_F(VsockDatapathTest, HostCloseShutsDownTheGuestAndItsRstCompletes) {
  Boot();
  Stream s = Establish(1024);
  WriteAll(s.host.get(), "bye");
  s.host.reset();
  RxPacket p = Next();
  EXPECT_EQ(p.payload, "bye");
  RxPacket sh = Next();
  EXPECT_EQ(sh.hdr.operation(), Op::kShutdown);
  EXPECT_EQ(sh.hdr.flags, kShutdownBoth);
  Send(Op::kRst, 1024, s.host_port);
  ASSERT_OK(driver_->WaitTxDrained());
  EXPECT_EQ(backend_->connections(), 0u);
  EXPECT_FALSE(driver_->RxPending()) << "no RST answers the guest's RST";
}

TEST_F(VsockDatapathTest, HostCloseUnacknowledgedIsResetAfterTheTimeout) {
  VsockServiceOptions o;
  o.close_timeout = std::chrono::milliseconds(100);
  Boot(o);
  Stream s = Establish(1024);
  s.host.reset();
  EXPECT_EQ(Next().hdr.operation(), Op::kShutdown);
  RxPacket rst = Next();
  EXPECT_EQ(rst.hdr.operation(), Op::kRst);
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockDatapathTest, HostHalfCloseSendsShutdownSendOnly) {
  Boot();
  Stream s = Establish(1024);
  ASSERT_EQ(::shutdown(s.host.get(), SHUT_WR), 0);
  RxPacket sh = Next();
  EXPECT_EQ(sh.hdr.operation(), Op::kShutdown);
  EXPECT_EQ(sh.hdr.flags, kShutdownSend);
  Send(Op::kRw, 1024, s.host_port, "still listening");
  EXPECT_EQ(ReadN(s.host.get(), 15), "still listening");
}

TEST_F(VsockDatapathTest, OneSlowStreamDoesNotHoldUpTheOthers) {
  Boot();
  constexpr int kStreams = 8;
  constexpr size_t kBytes = 100 * 1024;
  std::vector<Stream> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(Establish(2000 + i, i == 0 ? 4096 : 256 * 1024));
  // Host -> guest: stream 0's guest grants 4 KiB and never more.
  for (int i = 0; i < kStreams; ++i) WriteAll(streams[i].host.get(), Pattern(kBytes, i));
  std::map<uint32_t, std::string> got;
  std::map<uint32_t, uint32_t> announced;
  auto done = [&] {
    for (int i = 1; i < kStreams; ++i)
      if (got[streams[i].guest_port].size() < kBytes) return false;
    return true;
  };
  while (!done()) {
    RxPacket p = Next();
    ASSERT_NE(p.hdr.op, 0);
    uint32_t port = p.hdr.dst_port;
    if (p.hdr.operation() == Op::kCreditRequest) continue;  // stream 0 stays starved
    ASSERT_EQ(p.hdr.operation(), Op::kRw);
    got[port] += p.payload;
    if (port != 2000 && got[port].size() - announced[port] >= 128 * 1024 / 2) {
      announced[port] = static_cast<uint32_t>(got[port].size());
      Send(Op::kCreditUpdate, port, p.hdr.src_port, {}, 256 * 1024, announced[port]);
    }
  }
  for (int i = 1; i < kStreams; ++i) EXPECT_EQ(got[streams[i].guest_port], Pattern(kBytes, i));
  EXPECT_EQ(got[2000], Pattern(kBytes, 0).substr(0, 4096));
  // Guest -> host: stream 0's host reader never reads; the others still flow.
  std::string big = Pattern(kMaxPacketPayload, 9);
  for (int k = 0; k < 4; ++k) Send(Op::kRw, 2000, streams[0].host_port, big, 4096, 4096);
  for (int i = 1; i < kStreams; ++i) Send(Op::kRw, 2000 + i, streams[i].host_port, Pattern(50000, 20 + i));
  for (int i = 1; i < kStreams; ++i) EXPECT_EQ(ReadN(streams[i].host.get(), 50000), Pattern(50000, 20 + i));
}

TEST_F(VsockDatapathTest, RxStarvationResumesWhenTheGuestPostsBuffers) {
  FakeDriver::Options d;
  d.auto_repost_rx = false;
  Boot({}, d);
  Stream s = Establish(1024);
  driver_->PostRxBuffers();  // refill the two buffers the handshake used
  // 64 rx buffers of 4 KiB: 300 KiB cannot fit at once.
  std::string data = Pattern(300 * 1024, 5);
  std::thread writer([&] { WriteAll(s.host.get(), data); });
  std::string got;
  for (int i = 0; i < 64; ++i) {
    RxPacket p = Next();
    ASSERT_EQ(p.hdr.operation(), Op::kRw);
    got += p.payload;
  }
  EXPECT_LE(got.size(), 64u * 4096);
  EXPECT_FALSE(driver_->RxPending()) << "every buffer is used; the back end waits";
  uint32_t fwd = static_cast<uint32_t>(got.size());
  Send(Op::kCreditUpdate, 1024, s.host_port, {}, 256 * 1024, fwd);
  driver_->PostRxBuffers();  // kicks the device, which resumes
  while (got.size() < data.size()) {
    auto p = driver_->Receive();
    ASSERT_OK(p);
    if (p->hdr.operation() == Op::kRw) got += p->payload;
    if (got.size() - fwd >= 128 * 1024) {
      fwd = static_cast<uint32_t>(got.size());
      Send(Op::kCreditUpdate, 1024, s.host_port, {}, 256 * 1024, fwd);
    }
    driver_->PostRxBuffers();
  }
  writer.join();
  EXPECT_EQ(got, data);
}

TEST_F(VsockDatapathTest, WorksWithoutEventIdx) {
  FakeDriver::Options d;
  d.event_idx = false;
  Boot({}, d);
  EXPECT_FALSE(driver_->acked_features() & (1ULL << 29));
  Stream s = Establish(1024);
  std::string data = Pattern(100000, 6);
  WriteAll(s.host.get(), data);
  EXPECT_EQ(ReceiveData(s, data.size()), data);
  Send(Op::kRw, 1024, s.host_port, "ack");
  EXPECT_EQ(ReadN(s.host.get(), 3), "ack");
}

TEST_F(VsockDatapathTest, SingleDescriptorRxBuffersWork) {
  FakeDriver::Options d;
  d.rx_split_header = false;
  Boot({}, d);
  Stream s = Establish(1024);
  std::string data = Pattern(50000, 7);
  WriteAll(s.host.get(), data);
  EXPECT_EQ(ReceiveData(s, data.size()), data);
}

TEST_F(VsockDatapathTest, StreamsSurviveAQueueStopAndRestart) {
  Boot();
  Stream s = Establish(1024);
  ASSERT_OK(driver_->GetVringBase(0));  // QEMU stops rings when the VM pauses
  ASSERT_OK(driver_->GetVringBase(1));
  WriteAll(s.host.get(), "while paused");
  ASSERT_OK(driver_->Resume());
  RxPacket p = Next();
  EXPECT_EQ(p.payload, "while paused");
  Send(Op::kRw, 1024, s.host_port, "resumed");
  EXPECT_EQ(ReadN(s.host.get(), 7), "resumed");
}

TEST_F(VsockDatapathTest, GuestDriverResetClosesHostStreams) {
  Boot();
  Stream s = Establish(1024);
  Send(Op::kRw, 1024, s.host_port, "before reboot");
  EXPECT_EQ(ReadN(s.host.get(), 13), "before reboot");
  ASSERT_OK(driver_->GetVringBase(0));
  ASSERT_OK(driver_->GetVringBase(1));
  ASSERT_OK(driver_->ResetAndStart());
  EXPECT_TRUE(WaitEof(s.host.get())) << "the guest forgot the stream; the host learns it";
  EXPECT_EQ(backend_->connections(), 0u);
  Stream again = Establish(1024);  // and the rebooted guest is reachable
  EXPECT_EQ(backend_->connections(), 1u);
}

TEST_F(VsockDatapathTest, RequestReusingLivePortsReplacesTheConnection) {
  Boot();
  auto listener = ListenUnix(backend_->uds() + "_5001");
  ASSERT_OK(listener);
  for (int round = 0; round < 2; ++round) {
    Send(Op::kRequest, 7000, 5001);
    EXPECT_EQ(Next().hdr.operation(), Op::kResponse);
  }
  ASSERT_OK(WaitFd(listener->get(), POLLIN, kWait, "accept"));
  UniqueFd first(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  UniqueFd second(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(WaitEof(first.get())) << "the stale stream is closed";
  Send(Op::kRw, 7000, 5001, "new");
  EXPECT_EQ(ReadN(second.get(), 3), "new");
  EXPECT_EQ(backend_->connections(), 1u);
}

}  // namespace
}  // namespace capsule::vsock::testing
