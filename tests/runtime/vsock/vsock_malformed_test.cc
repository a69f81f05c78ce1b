// A hostile or buggy guest driver: descriptor chains and packets that break
// the rules must be dropped (and the buffer returned) while the device keeps
// serving everything else.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

using Desc = FakeDriver::Desc;
constexpr uint16_t kWrite = 2;
constexpr uint16_t kIndirect = 4;

class VsockMalformedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = InProcessBackend::Start();
    ASSERT_OK(b);
    backend_ = std::move(*b);
    auto d = FakeDriver::Connect(backend_->vhost_socket());
    ASSERT_OK(d);
    driver_ = std::move(*d);
    ASSERT_OK(driver_->Realize());
    ASSERT_OK(driver_->Start());
  }

  // A header in guest memory; returns its address.
  uint64_t Header(Op op, uint32_t len, uint32_t src_port = 50) {
    PacketHeader h = GuestPacket(kGuestCid, op, src_port, 60);
    h.len = len;
    uint64_t gpa = driver_->AllocTx(kPacketHeaderSize);
    EncodeHeader(h, driver_->Host(gpa));
    return gpa;
  }

  // The device still answers: an RW for no connection comes back as RST.
  void ExpectAlive(uint32_t marker_port) {
    ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRw, marker_port, 61), "m"));
    auto p = driver_->Receive();
    ASSERT_OK(p);
    EXPECT_EQ(p->hdr.operation(), Op::kRst);
    EXPECT_EQ(p->hdr.dst_port, marker_port) << "no answer to the malformed packet";
  }

  void ExpectDropped(const std::vector<Desc>& chain, uint32_t marker_port) {
    uint64_t before = backend_->malformed();
    driver_->PublishTxChain(chain);
    ASSERT_OK(driver_->WaitTxDrained()) << "the malformed chain is handed back";
    EXPECT_EQ(backend_->malformed(), before + 1);
    ExpectAlive(marker_port);
  }

  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<FakeDriver> driver_;
};

TEST_F(VsockMalformedTest, HeaderSplitAcrossDescriptorsIsValid) {
  uint64_t h = Header(Op::kRw, 3);
  uint64_t data = driver_->AllocTx(3);
  std::memcpy(driver_->Host(data), "abc", 3);
  driver_->PublishTxChain({{h, 10}, {h + 10, 30}, {h + 40, 4}, {data, 3}});
  auto p = driver_->Receive();
  ASSERT_OK(p);
  EXPECT_EQ(p->hdr.operation(), Op::kRst) << "parsed: RW for an unknown connection";
  EXPECT_EQ(p->hdr.dst_port, 50u);
  EXPECT_EQ(backend_->malformed(), 0u);
}

TEST_F(VsockMalformedTest, ShortHeaderIsDropped) { ExpectDropped({{Header(Op::kRw, 0), 20}}, 100); }

TEST_F(VsockMalformedTest, LengthBeyondThePayloadIsDropped) {
  uint64_t data = driver_->AllocTx(10);
  ExpectDropped({{Header(Op::kRw, 11), kPacketHeaderSize}, {data, 10}}, 101);
}

TEST_F(VsockMalformedTest, LengthAboveTheMaximumIsDropped) {
  uint64_t data = driver_->AllocTx(70000);
  ExpectDropped({{Header(Op::kRw, 70000), kPacketHeaderSize}, {data, 70000}}, 102);
}

TEST_F(VsockMalformedTest, DescriptorOutsideGuestMemoryIsDropped) {
  ExpectDropped({{Header(Op::kRw, 8), kPacketHeaderSize}, {0x10, 8}}, 103);
  ExpectDropped({{Header(Op::kRw, 8), kPacketHeaderSize}, {driver_->mem_end_gpa() - 4, 8}}, 104);
  ExpectDropped({{Header(Op::kRw, 8), kPacketHeaderSize}, {~0ULL - 2, 8}}, 105);
}

TEST_F(VsockMalformedTest, WritableDescriptorInATxChainIsDropped) {
  uint64_t data = driver_->AllocTx(8);
  ExpectDropped({{Header(Op::kRw, 8), kPacketHeaderSize}, {data, 8, kWrite}}, 106);
  // Readable after writable breaks the chain order rule too.
  ExpectDropped({{data, 8, kWrite}, {Header(Op::kRw, 0), kPacketHeaderSize}}, 107);
}

TEST_F(VsockMalformedTest, IndirectDescriptorIsDropped) {
  ExpectDropped({{Header(Op::kRw, 0), kPacketHeaderSize, kIndirect}}, 108);
}

TEST_F(VsockMalformedTest, LoopingChainsAreDropped) {
  Desc self{Header(Op::kRw, 0), 8};
  self.loop_to_head = true;
  ExpectDropped({self}, 109);
  Desc back{0, 8};
  back.gpa = driver_->AllocTx(8);
  back.loop_to_head = true;
  ExpectDropped({{Header(Op::kRw, 0), kPacketHeaderSize}, back}, 113);
}

TEST_F(VsockMalformedTest, NextBeyondTheQueueIsDropped) {
  ExpectDropped({{Header(Op::kRw, 0), 8, 0, uint16_t{1000}}}, 110);
}

TEST_F(VsockMalformedTest, HeadBeyondTheQueueIsSkipped) {
  uint64_t before = backend_->malformed();
  driver_->PublishTxHead(4000);
  ExpectAlive(111);
  EXPECT_EQ(backend_->malformed(), before + 1);
}

TEST_F(VsockMalformedTest, AvailIndexRunningAheadStopsOnlyThatQueue) {
  driver_->BumpTxAvailIdx(1000);
  // Host-initiated traffic uses rx only and still works.
  auto host = HostConnect(backend_->uds(), 1024);
  ASSERT_OK(host);
  auto req = driver_->Receive();
  ASSERT_OK(req);
  EXPECT_EQ(req->hdr.operation(), Op::kRequest);
  // And the vhost-user side still answers.
  EXPECT_OK(driver_->GetU64(vhost_user::Request::kGetFeatures));
}

TEST_F(VsockMalformedTest, GarbageHeadersAreAnsweredOrIgnoredNeverTrusted) {
  // Random-looking headers with valid lengths: each either yields an RST or
  // nothing, and the device stays up.
  uint32_t seed = 12345;
  for (int i = 0; i < 200; ++i) {
    uint8_t raw[kPacketHeaderSize];
    for (uint8_t& b : raw) {
      seed = seed * 1103515245 + 12345;
      b = static_cast<uint8_t>(seed >> 16);
    }
    PacketHeader h = DecodeHeader(raw);
    h.len = 0;
    h.src_cid = (i % 2) ? kGuestCid : h.src_cid;
    h.dst_cid = (i % 3) ? kHostCid : h.dst_cid;
    if (h.operation() == Op::kRequest) h.op = static_cast<uint16_t>(Op::kRw);  // no unix connects
    ASSERT_OK(driver_->SendPacket(h));
  }
  // Every answer is an RST; the marker's comes last.
  ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRw, 112, 61), "m"));
  for (;;) {
    auto p = driver_->Receive();
    ASSERT_OK(p);
    ASSERT_EQ(p->hdr.operation(), Op::kRst) << p->hdr.ToString();
    if (p->hdr.dst_port == 112 && p->hdr.src_port == 61) break;
  }
  EXPECT_EQ(backend_->connections(), 0u);
}

}  // namespace
}  // namespace capsule::vsock::testing
