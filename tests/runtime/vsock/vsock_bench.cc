// Throughput and connect latency of the back end with the fake driver as the
// guest (label bench; prints, asserts only correctness). The fake guest uses
// Linux's buffer shapes (4 KiB rx buffers, 64 KiB tx packets) and grants
// credit like Linux, so the figures bound what the back end itself costs;
// a real guest under TCG is far slower (see vsock_qemu_test).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

constexpr uint32_t kGuestBuf = 256 * 1024;

class VsockBench : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = InProcessBackend::Start();
    ASSERT_OK(b);
    backend_ = std::move(*b);
    FakeDriver::Options o;
    o.queue_size = 256;
    o.mem_size = 32 << 20;
    auto d = FakeDriver::Connect(backend_->vhost_socket(), o);
    ASSERT_OK(d);
    driver_ = std::move(*d);
    ASSERT_OK(driver_->Realize());
    ASSERT_OK(driver_->Start());
  }

  // Hybrid CONNECT answered by the fake guest; returns the host fd.
  UniqueFd Connect(uint32_t port, uint32_t* host_port) {
    auto host = HostConnect(backend_->uds(), port);
    EXPECT_OK(host);
    auto req = driver_->Receive();
    EXPECT_OK(req);
    *host_port = req->hdr.src_port;
    EXPECT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kResponse, port, *host_port, kGuestBuf)));
    EXPECT_EQ(ReadLine(host->get()), "OK " + std::to_string(*host_port) + "\n");
    return std::move(*host);
  }

  std::unique_ptr<InProcessBackend> backend_;
  std::unique_ptr<FakeDriver> driver_;
};

double MiBps(size_t bytes, std::chrono::steady_clock::duration d) {
  return bytes / std::chrono::duration<double>(d).count() / (1 << 20);
}

TEST_F(VsockBench, HostToGuestThroughput) {
  uint32_t hp;
  UniqueFd host = Connect(1024, &hp);
  constexpr size_t kTotal = 256 << 20;
  std::thread writer([&] {
    std::string chunk(1 << 20, 'x');
    for (size_t sent = 0; sent < kTotal; sent += chunk.size())
      for (size_t off = 0; off < chunk.size();) {
        ssize_t n = ::send(host.get(), chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
        ASSERT_GT(n, 0);
        off += static_cast<size_t>(n);
      }
  });
  auto t0 = std::chrono::steady_clock::now();
  size_t got = 0;
  uint32_t announced = 0;
  size_t packets = 0;
  while (got < kTotal) {
    auto p = driver_->Receive();
    ASSERT_OK(p);
    if (p->hdr.operation() != Op::kRw) continue;
    got += p->payload.size();
    ++packets;
    if (got - announced >= kGuestBuf / 2) {
      announced = static_cast<uint32_t>(got);
      ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kCreditUpdate, 1024, hp, kGuestBuf, announced)));
    }
  }
  auto dt = std::chrono::steady_clock::now() - t0;
  writer.join();
  std::printf("[ bench ] host->guest: %zu MiB in %zu packets: %.0f MiB/s\n", kTotal >> 20, packets, MiBps(kTotal, dt));
}

TEST_F(VsockBench, GuestToHostThroughput) {
  uint32_t hp;
  UniqueFd host = Connect(1024, &hp);
  constexpr size_t kTotal = 256 << 20;
  std::thread reader([&] {
    std::vector<char> buf(1 << 20);
    size_t got = 0;
    while (got < kTotal) {
      ssize_t n = ::recv(host.get(), buf.data(), buf.size(), 0);
      ASSERT_GT(n, 0);
      got += static_cast<size_t>(n);
    }
  });
  std::string payload(kMaxPacketPayload, 'y');
  auto t0 = std::chrono::steady_clock::now();
  size_t sent = 0;
  uint32_t peer_fwd = 0;
  while (sent < kTotal) {
    uint32_t credit = kDefaultBufAlloc - (static_cast<uint32_t>(sent) - peer_fwd);
    while (driver_->RxPending() || credit == 0) {
      auto p = driver_->Receive();
      ASSERT_OK(p);
      if (p->hdr.operation() == Op::kCreditUpdate) peer_fwd = p->hdr.fwd_cnt;
      credit = kDefaultBufAlloc - (static_cast<uint32_t>(sent) - peer_fwd);
    }
    uint32_t n = std::min<uint32_t>({credit, kMaxPacketPayload, static_cast<uint32_t>(kTotal - sent)});
    ASSERT_TRUE(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRw, 1024, hp, kGuestBuf),
                                    std::string_view(payload).substr(0, n))
                    .ok());
    sent += n;
  }
  reader.join();
  auto dt = std::chrono::steady_clock::now() - t0;
  std::printf("[ bench ] guest->host: %zu MiB: %.0f MiB/s\n", kTotal >> 20, MiBps(kTotal, dt));
}

TEST_F(VsockBench, HybridConnectLatency) {
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    uint32_t hp;
    UniqueFd host = Connect(2000, &hp);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    host.reset();
    // Finish the close so connections do not pile up: SHUTDOWN, then our RST.
    for (;;) {
      auto p = driver_->Receive();
      ASSERT_OK(p);
      if (p->hdr.operation() == Op::kShutdown) break;
    }
    ASSERT_OK(driver_->SendPacket(GuestPacket(kGuestCid, Op::kRst, 2000, hp)));
  }
  std::sort(us.begin(), us.end());
  std::printf("[ bench ] hybrid CONNECT -> OK with the fake guest: median %.0f us, p90 %.0f us (200 runs)\n",
              us[us.size() / 2], us[us.size() * 9 / 10]);
}

}  // namespace
}  // namespace capsule::vsock::testing
