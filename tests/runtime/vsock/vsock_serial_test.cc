// vsock over a virtio-serial port, both ends real: the back end's serial
// front end (VsockService as capsule-vsockd runs it) and, in place of the
// guest, the same VsockStreamLink the agent runs, joined by the unix socket
// QEMU's virtserialport would hold. The guest's listeners are unix sockets,
// as in the agent. QEMU in the middle is covered by the VM tests.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "runtime/common/unix_stream.h"
#include "runtime/vsock/serial_frontend.h"
#include "runtime/vsock/stream_link.h"
#include "runtime/vsock/vsock_packet.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

constexpr uint32_t kAgentPort = 1024;

// The guest's end: a link on its own loop thread, the agent's unix listener.
class GuestEnd {
 public:
  static std::unique_ptr<GuestEnd> Attach(const std::string& serial_socket, const std::string& dir) {
    auto g = std::unique_ptr<GuestEnd>(new GuestEnd());
    auto loop = EventLoop::Create();
    EXPECT_OK(loop);
    g->loop_ = std::move(*loop);
    auto listener = ListenUnix(dir + "/guest-vsock_" + std::to_string(kAgentPort));
    EXPECT_OK(listener);
    g->listener_ = std::move(*listener);
    auto port = ConnectUnix(serial_socket);
    EXPECT_OK(port);
    VsockMuxer::Options o;
    o.local_cid = kGuestCid;
    o.peer_cid = kHostCid;
    o.uds_path = dir + "/guest-vsock";
    GuestEnd* self = g.get();
    auto link = VsockStreamLink::Start(*g->loop_, std::move(*port), o, [self](const Status&) { self->lost_ = true; });
    EXPECT_OK(link);
    g->link_ = std::move(*link);
    g->thread_ = std::thread([self] { (void)self->loop_->Run(); });
    return g;
  }
  ~GuestEnd() { Detach(); }
  // The port closes, as when the guest's agent or the VM goes.
  void Detach() {
    if (!thread_.joinable()) return;
    loop_->Stop();
    thread_.join();
    link_.reset();
  }
  UniqueFd Accept() {
    if (!WaitFd(listener_.get(), POLLIN, kWait, "guest accept").ok()) return UniqueFd();
    return UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  bool lost() const { return lost_; }

 private:
  GuestEnd() = default;
  EventLoopPtr loop_;
  UniqueFd listener_;
  VsockStreamLinkPtr link_;
  std::thread thread_;
  std::atomic<bool> lost_{false};
};

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class VsockSerialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("vsock-serial");
    ASSERT_OK(dir);
    dir_ = std::make_unique<TempDir>(std::move(*dir));
    VsockServiceOptions o;
    o.serial_socket = dir_->Join("serial.sock");
    auto b = InProcessBackend::Start(o);
    ASSERT_OK(b);
    backend_ = std::move(*b);
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<InProcessBackend> backend_;
};

TEST_F(VsockSerialTest, AHostConnectReachesTheGuestsListenerAndCarriesAMegabyteEachWay) {
  auto guest = GuestEnd::Attach(backend_->serial_socket(), dir_->path());
  auto host = HostConnect(backend_->uds(), kAgentPort);
  ASSERT_OK(host);
  UniqueFd g = guest->Accept();
  ASSERT_TRUE(g);
  std::string ok = ReadLine(host->get());
  EXPECT_EQ(ok.rfind("OK ", 0), 0u) << ok;

  // More than any one side's credit (256 KiB), both ways at once.
  const std::string up = RandomBytes(1 << 20, 1), down = RandomBytes(1 << 20, 2);
  std::thread writer_up([&] { EXPECT_TRUE(SendAll(host->get(), up)); });
  std::thread writer_down([&] { EXPECT_TRUE(SendAll(g.get(), down)); });
  std::string got_up = ReadN(g.get(), up.size());
  std::string got_down = ReadN(host->get(), down.size());
  writer_up.join();
  writer_down.join();
  EXPECT_TRUE(got_up == up) << "guest got " << got_up.size() << " of " << up.size() << " bytes, or other bytes";
  EXPECT_TRUE(got_down == down) << "host got " << got_down.size() << " of " << down.size() << " bytes, or other bytes";

  // A close on one side is an EOF on the other, and the stream is gone.
  ::shutdown(host->get(), SHUT_WR);
  EXPECT_TRUE(WaitEof(g.get()));
  g.reset();
  EXPECT_TRUE(WaitEof(host->get()));
  for (int i = 0; i < 100 && backend_->connections() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockSerialTest, AConnectToAPortNobodyListensOnIsRefused) {
  auto guest = GuestEnd::Attach(backend_->serial_socket(), dir_->path());
  auto host = HostConnect(backend_->uds(), 4242);
  ASSERT_OK(host);
  EXPECT_TRUE(WaitEof(host->get()));
  EXPECT_EQ(ReadLine(host->get(), std::chrono::milliseconds(100)), "");
}

TEST_F(VsockSerialTest, AConnectBeforeAnyVmPortIsAttachedFailsFast) {
  auto host = HostConnect(backend_->uds(), kAgentPort);
  ASSERT_OK(host);
  EXPECT_TRUE(WaitEof(host->get(), std::chrono::milliseconds(2000)));
  EXPECT_FALSE(backend_->frontend_gone());
}

TEST_F(VsockSerialTest, WhenThePortGoesEveryStreamEndsAndTheBackEndReportsIt) {
  auto guest = GuestEnd::Attach(backend_->serial_socket(), dir_->path());
  auto host = HostConnect(backend_->uds(), kAgentPort);
  ASSERT_OK(host);
  UniqueFd g = guest->Accept();
  ASSERT_TRUE(g);
  ASSERT_EQ(ReadLine(host->get()).rfind("OK ", 0), 0u);
  guest->Detach();
  EXPECT_TRUE(WaitEof(host->get()));
  for (int i = 0; i < 100 && !backend_->frontend_gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(backend_->frontend_gone());
  EXPECT_EQ(backend_->connections(), 0u);
}

TEST_F(VsockSerialTest, ASecondPortIsRefusedWhileOneIsAttached) {
  auto guest = GuestEnd::Attach(backend_->serial_socket(), dir_->path());
  auto second = ConnectUnix(backend_->serial_socket());
  ASSERT_OK(second);
  EXPECT_TRUE(WaitEof(second->get()));
  // The first still works.
  auto host = HostConnect(backend_->uds(), kAgentPort);
  ASSERT_OK(host);
  UniqueFd g = guest->Accept();
  ASSERT_TRUE(g);
  EXPECT_EQ(ReadLine(host->get()).rfind("OK ", 0), 0u);
}

TEST_F(VsockSerialTest, AFrameLongerThanAnyPacketBreaksTheLinkAndClosesItsStreams) {
  auto port = ConnectUnix(backend_->serial_socket());
  ASSERT_OK(port);
  PacketHeader h;
  h.src_cid = kGuestCid;
  h.dst_cid = kHostCid;
  h.op = static_cast<uint16_t>(Op::kRw);
  h.len = kMaxPacketPayload + 1;
  uint8_t raw[kPacketHeaderSize];
  EncodeHeader(h, raw);
  ASSERT_TRUE(SendAll(port->get(), std::string_view(reinterpret_cast<const char*>(raw), sizeof raw)));
  EXPECT_TRUE(WaitEof(port->get()));
  for (int i = 0; i < 100 && !backend_->frontend_gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(backend_->frontend_gone());
}

TEST_F(VsockSerialTest, PacketsFromAnotherCidAreDroppedAndUnknownStreamsReset) {
  auto port = ConnectUnix(backend_->serial_socket());
  ASSERT_OK(port);
  auto send = [&](uint64_t src_cid, Op op) {
    PacketHeader h;
    h.src_cid = src_cid;
    h.dst_cid = kHostCid;
    h.src_port = 5000;
    h.dst_port = 6000;
    h.op = static_cast<uint16_t>(op);
    uint8_t raw[kPacketHeaderSize];
    EncodeHeader(h, raw);
    return SendAll(port->get(), std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
  };
  ASSERT_TRUE(send(kGuestCid + 1, Op::kRw));  // spoofed: no answer
  ASSERT_TRUE(send(kGuestCid, Op::kRw));      // ours, no such stream: RST
  std::string reply = ReadN(port->get(), kPacketHeaderSize);
  ASSERT_EQ(reply.size(), kPacketHeaderSize);
  PacketHeader rst = DecodeHeader(reinterpret_cast<const uint8_t*>(reply.data()));
  EXPECT_EQ(rst.operation(), Op::kRst) << rst.ToString();
  EXPECT_EQ(rst.src_cid, kHostCid);
  EXPECT_EQ(rst.dst_cid, kGuestCid);
  EXPECT_EQ(rst.dst_port, 5000u);
  EXPECT_EQ(ReadN(port->get(), 1, std::chrono::milliseconds(200)), "");  // and only one
}

}  // namespace
}  // namespace capsule::vsock::testing
