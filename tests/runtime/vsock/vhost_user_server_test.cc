// The vhost-user control plane against a fake QEMU: negotiation as QEMU 7.2
// does it, the vsock config space, and malformed requests that must be
// refused (or drop the connection) without crashing the back end.
#include <gtest/gtest.h>

#include <sys/eventfd.h>

#include <cstring>

#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

using vhost_user::Request;

class VhostUserServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = InProcessBackend::Start();
    ASSERT_OK(b);
    backend_ = std::move(*b);
    auto d = FakeDriver::Connect(backend_->vhost_socket());
    ASSERT_OK(d);
    driver_ = std::move(*d);
  }

  uint64_t Acked(Request r, const std::vector<uint8_t>& payload, const std::vector<int>& fds = {}) {
    auto v = driver_->SendAcked(r, payload, fds);
    EXPECT_OK(v);
    return v.ok() ? *v : 99;
  }

  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<FakeDriver> driver_;
};

TEST_F(VhostUserServerTest, RealizeNegotiatesFeaturesAndReadsGuestCid) {
  ASSERT_OK(driver_->Realize());
  uint64_t f = driver_->offered_features();
  EXPECT_TRUE(f & (1ULL << 32)) << "VIRTIO_F_VERSION_1";
  EXPECT_TRUE(f & (1ULL << 30)) << "VHOST_USER_F_PROTOCOL_FEATURES";
  EXPECT_TRUE(f & (1ULL << 29)) << "VIRTIO_RING_F_EVENT_IDX";
  EXPECT_FALSE(f & (1ULL << 28)) << "indirect descriptors are not offered";
  EXPECT_FALSE(f & (1ULL << 1)) << "SEQPACKET is not offered";
  EXPECT_EQ(driver_->protocol_features(),
            vhost_user::kProtocolMq | vhost_user::kProtocolReplyAck | vhost_user::kProtocolConfig);
  auto qn = driver_->GetU64(Request::kGetQueueNum);
  ASSERT_OK(qn);
  EXPECT_EQ(*qn, 3u);
  auto cfg = driver_->GetConfig(0, 8);
  ASSERT_OK(cfg);
  uint64_t cid;
  std::memcpy(&cid, cfg->data(), 8);
  EXPECT_EQ(cid, kGuestCid);
  auto part = driver_->GetConfig(4, 4);
  ASSERT_OK(part);
  EXPECT_EQ(*part, std::vector<uint8_t>(4, 0));
}

TEST_F(VhostUserServerTest, StartThenStopReportsRingBases) {
  ASSERT_OK(driver_->Realize());
  ASSERT_OK(driver_->Start());
  // Two packets on tx: the back end consumes them (RSTs go back on rx).
  ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRw, 1, 2)));
  ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRw, 3, 4)));
  ASSERT_OK(driver_->Receive());
  ASSERT_OK(driver_->Receive());
  auto tx_base = driver_->GetVringBase(1);
  ASSERT_OK(tx_base);
  EXPECT_EQ(*tx_base, 2);
  auto rx_base = driver_->GetVringBase(0);
  ASSERT_OK(rx_base);
  EXPECT_EQ(*rx_base, 2) << "two rx buffers carried the RSTs";
}

TEST_F(VhostUserServerTest, ConfigOutsideTheVsockConfigIsRefused) {
  ASSERT_OK(driver_->Realize());
  auto cfg = driver_->GetConfig(4, 8);
  EXPECT_FALSE(cfg.ok());
  // SET_CONFIG of the read-only guest_cid fails, unless it is a migration restore.
  std::vector<uint8_t> cid(8, 7);
  EXPECT_NE(Acked(Request::kSetConfig, vhost_user::EncodeConfig(0, 0, cid)), 0u);
  EXPECT_EQ(Acked(Request::kSetConfig, vhost_user::EncodeConfig(0, vhost_user::kConfigFlagMigration, cid)), 0u);
  auto again = driver_->GetConfig(0, 8);
  ASSERT_OK(again);
  EXPECT_EQ((*again)[0], kGuestCid);
}

TEST_F(VhostUserServerTest, FeaturesNotOfferedAreRefused) {
  ASSERT_OK(driver_->Realize());
  EXPECT_NE(Acked(Request::kSetFeatures, vhost_user::EncodeU64(1ULL << 28)), 0u) << "indirect";
  EXPECT_NE(Acked(Request::kSetProtocolFeatures, vhost_user::EncodeU64(1ULL << 5)), 0u) << "backend req";
  EXPECT_EQ(Acked(Request::kSetFeatures, vhost_user::EncodeU64(1ULL << 32)), 0u);
}

TEST_F(VhostUserServerTest, MalformedRequestsAreRefusedAndTheConnectionSurvives) {
  ASSERT_OK(driver_->Realize());
  // Wrong payload sizes.
  EXPECT_NE(Acked(Request::kSetVringNum, std::vector<uint8_t>(4, 0)), 0u);
  EXPECT_NE(Acked(Request::kSetFeatures, std::vector<uint8_t>(3, 0)), 0u);
  // Out-of-range queue index, non-power-of-two and oversized queues.
  EXPECT_NE(Acked(Request::kSetVringNum, vhost_user::EncodeVringState({7, 128})), 0u);
  EXPECT_NE(Acked(Request::kSetVringNum, vhost_user::EncodeVringState({0, 100})), 0u);
  EXPECT_NE(Acked(Request::kSetVringNum, vhost_user::EncodeVringState({0, 65536})), 0u);
  EXPECT_NE(Acked(Request::kSetVringBase, vhost_user::EncodeVringState({0, 70000})), 0u);
  EXPECT_NE(Acked(Request::kSetVringEnable, vhost_user::EncodeVringState({0, 2})), 0u);
  // Memory tables: no regions, fds that do not match, a region too big to map.
  std::vector<uint8_t> empty_table(8, 0);
  EXPECT_NE(Acked(Request::kSetMemTable, empty_table), 0u);
  std::vector<uint8_t> table(8 + 32, 0);
  uint32_t one = 1;
  uint64_t huge = 1ULL << 62;
  std::memcpy(table.data(), &one, 4);
  std::memcpy(table.data() + 16, &huge, 8);
  EXPECT_NE(Acked(Request::kSetMemTable, table), 0u) << "region without an fd";
  UniqueFd ev(::eventfd(0, EFD_CLOEXEC));
  EXPECT_NE(Acked(Request::kSetMemTable, table, {ev.get()}), 0u) << "region the fd cannot back";
  // Kick without fd (polling) and with the no-fd flag contradicting the fds.
  EXPECT_NE(Acked(Request::kSetVringKick, vhost_user::EncodeU64(0x100)), 0u);
  EXPECT_NE(Acked(Request::kSetVringKick, vhost_user::EncodeU64(0)), 0u);
  EXPECT_NE(Acked(Request::kSetVringCall, vhost_user::EncodeU64(0x100), {ev.get()}), 0u);
  // Ring addresses with no memory behind them, and dirty logging.
  std::vector<uint8_t> addr(40, 0);
  uint64_t bogus = 0xdead0000;
  std::memcpy(addr.data() + 8, &bogus, 8);
  EXPECT_EQ(Acked(Request::kSetVringAddr, addr), 0u) << "no memory table yet: addresses are kept for later";
  addr[4] = 1;  // VHOST_VRING_F_LOG
  EXPECT_NE(Acked(Request::kSetVringAddr, addr), 0u);
  // Unknown and unsupported requests.
  EXPECT_NE(Acked(static_cast<Request>(99), {}), 0u);
  EXPECT_NE(Acked(Request::kSetLogBase, vhost_user::EncodeU64(0)), 0u);
  // GET_VRING_BASE of a queue that does not exist answers with an empty payload.
  ASSERT_OK(driver_->Send(static_cast<uint32_t>(Request::kGetVringBase), vhost_user::EncodeVringState({9, 0})));
  auto r = driver_->Recv();
  ASSERT_OK(r);
  EXPECT_TRUE(r->payload.empty());
  // Still serving: a normal start works.
  ASSERT_OK(driver_->Start());
  EXPECT_FALSE(backend_->frontend_gone());
}

TEST_F(VhostUserServerTest, RingsOutsideGuestMemoryAreRefused) {
  ASSERT_OK(driver_->Realize());
  ASSERT_OK(driver_->Start());
  std::vector<uint8_t> addr(40, 0);
  uint64_t outside = 0x1000;  // below the region's user address
  std::memcpy(addr.data() + 8, &outside, 8);
  std::memcpy(addr.data() + 16, &outside, 8);
  std::memcpy(addr.data() + 24, &outside, 8);
  EXPECT_NE(Acked(Request::kSetVringAddr, addr), 0u);
  uint64_t misaligned = 0x7f1234560000 + 3;
  std::memcpy(addr.data() + 8, &misaligned, 8);
  std::memcpy(addr.data() + 16, &misaligned, 8);
  std::memcpy(addr.data() + 24, &misaligned, 8);
  EXPECT_NE(Acked(Request::kSetVringAddr, addr), 0u);
}

TEST_F(VhostUserServerTest, BadHeaderVersionDropsTheFrontEnd) {
  ASSERT_OK(driver_->Send(static_cast<uint32_t>(Request::kGetFeatures), {}, {}, 0x2));  // version 3
  EXPECT_TRUE(driver_->WaitPeerClosed());
  // The next front end is served.
  auto d2 = FakeDriver::Connect(backend_->vhost_socket());
  ASSERT_OK(d2);
  EXPECT_TRUE((*d2)->Realize().ok());
}

TEST_F(VhostUserServerTest, OversizedPayloadDropsTheFrontEnd) {
  std::vector<uint8_t> raw = vhost_user::EncodeHeader({2, vhost_user::kVersion, 1u << 20});
  ASSERT_OK(driver_->SendBytes(raw));
  EXPECT_TRUE(driver_->WaitPeerClosed());
  EXPECT_TRUE(backend_->frontend_gone());
}

TEST_F(VhostUserServerTest, SecondFrontEndIsRefusedWhileOneIsConnected) {
  ASSERT_OK(driver_->Realize());
  auto d2 = FakeDriver::Connect(backend_->vhost_socket());
  ASSERT_OK(d2);
  EXPECT_TRUE((*d2)->WaitPeerClosed());
  EXPECT_OK(driver_->GetU64(Request::kGetFeatures));
}

TEST_F(VhostUserServerTest, FrontEndDisconnectDropsGuestStreams) {
  ASSERT_OK(driver_->Realize());
  ASSERT_OK(driver_->Start());
  auto host = HostConnect(backend_->uds(), 1024);
  ASSERT_OK(host);
  auto req = driver_->Receive();
  ASSERT_OK(req);
  EXPECT_EQ(req->hdr.operation(), Op::kRequest);
  EXPECT_EQ(backend_->connections(), 1u);
  driver_->Disconnect();
  EXPECT_TRUE(WaitEof(host->get())) << "host stream closes with the front end";
  EXPECT_EQ(backend_->connections(), 0u);
  EXPECT_TRUE(backend_->frontend_gone());
}

}  // namespace
}  // namespace capsule::vsock::testing
