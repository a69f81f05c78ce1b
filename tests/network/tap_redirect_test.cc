// TapRedirect against the kernel: the tap and the tc objects it makes are
// checked with netlink dumps, and frames are sent through the mirror both
// ways (tap fd <-> the veth's peer in the "host" netns).
#include "runtime/network/tap_redirect.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/cls/u32.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "runtime/netlink/netlink_socket.h"
#include "runtime/network/netns.h"
#include "runtime/network/tc.h"
#include "tests/network/link_view.h"
#include "tests/network/pod_netns_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::network {
namespace {

using ::testing::HasSubstr;
using testing::kHostIf;
using testing::kPodIf;
using testing::kPodMac;
using testing::kPodMtu;

constexpr const char* kTap = "tap_cap0";
constexpr uint16_t kTestEtherType = 0x88b5;  // IEEE 802 local experimental
constexpr auto kFrameWait = std::chrono::seconds(5);

// What a netlink dump shows of the redirect in a netns.
struct TcView {
  int veth_index = 0;
  int tap_index = 0;  // 0: no such tap
  uint32_t tap_mtu = 0;
  bool tap_up = false;
  bool veth_ingress = false;
  bool tap_ingress = false;
  int veth_redirect_to = 0;  // ifindex a mirred egress redirect on veth's ingress points at
  int tap_redirect_to = 0;
};

// Target of the u32 filter with a mirred egress redirect on ifindex's ingress.
int RedirectTarget(netlink::NetlinkSocket& sock, int ifindex) {
  nl_cache* c = nullptr;
  if (rtnl_cls_alloc_cache(sock.get(), ifindex, kIngressHandle, &c) < 0) return 0;
  netlink::NlCachePtr cache(c);
  for (nl_object* o = nl_cache_get_first(c); o != nullptr; o = nl_cache_get_next(o)) {
    auto* cls = reinterpret_cast<rtnl_cls*>(o);
    if (std::strcmp(rtnl_tc_get_kind(TC_CAST(cls)), "u32") != 0) continue;
    rtnl_act* act = rtnl_u32_get_action(cls);
    if (act == nullptr || std::strcmp(rtnl_tc_get_kind(TC_CAST(act)), "mirred") != 0) continue;
    if (rtnl_mirred_get_action(act) != TCA_EGRESS_REDIR) continue;
    return static_cast<int>(rtnl_mirred_get_ifindex(act));
  }
  return 0;
}

TcView ReadTc(const std::string& netns) {
  TcView v;
  auto guard = NetnsGuard::Enter(netns);
  EXPECT_OK(guard);
  auto sock = netlink::NetlinkSocket::Open();
  EXPECT_OK(sock);
  if (!guard.ok() || !sock.ok()) return v;
  v.veth_index = testing::ViewLink(netns, kPodIf).index;
  const testing::LinkView tap = testing::ViewLink(netns, kTap);
  v.tap_index = tap.index;
  v.tap_mtu = tap.mtu;
  v.tap_up = tap.up;
  nl_cache* qc = nullptr;
  EXPECT_GE(rtnl_qdisc_alloc_cache((*sock)->get(), &qc), 0);
  netlink::NlCachePtr qdiscs(qc);
  for (nl_object* o = nl_cache_get_first(qc); o != nullptr; o = nl_cache_get_next(o)) {
    auto* q = reinterpret_cast<rtnl_qdisc*>(o);
    if (std::strcmp(rtnl_tc_get_kind(TC_CAST(q)), "ingress") != 0) continue;
    if (rtnl_tc_get_ifindex(TC_CAST(q)) == v.veth_index) v.veth_ingress = true;
    if (v.tap_index != 0 && rtnl_tc_get_ifindex(TC_CAST(q)) == v.tap_index) v.tap_ingress = true;
  }
  if (v.veth_ingress) v.veth_redirect_to = RedirectTarget(**sock, v.veth_index);
  if (v.tap_ingress) v.tap_redirect_to = RedirectTarget(**sock, v.tap_index);
  return v;
}

std::vector<uint8_t> Mac(const char* text) {
  unsigned b[6];
  EXPECT_EQ(std::sscanf(text, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]), 6);
  return {static_cast<uint8_t>(b[0]), static_cast<uint8_t>(b[1]), static_cast<uint8_t>(b[2]),
          static_cast<uint8_t>(b[3]), static_cast<uint8_t>(b[4]), static_cast<uint8_t>(b[5])};
}

// An Ethernet frame of the test's own EtherType carrying `payload`, padded
// to the 60-byte minimum.
std::vector<uint8_t> Frame(const std::vector<uint8_t>& dst, const std::vector<uint8_t>& src,
                           const std::string& payload) {
  std::vector<uint8_t> f(dst);
  f.insert(f.end(), src.begin(), src.end());
  f.push_back(kTestEtherType >> 8);
  f.push_back(kTestEtherType & 0xff);
  f.insert(f.end(), payload.begin(), payload.end());
  if (f.size() < 60) f.resize(60, 0);
  return f;
}

// Reads frames from `fd` until one (after `skip` bytes of header) has our
// EtherType and `payload`; false once kFrameWait has passed. Other frames
// (the kernel's IPv6 router solicitations and the like) are skipped.
bool WaitForFrame(int fd, size_t skip, const std::string& payload) {
  const auto deadline = std::chrono::steady_clock::now() + kFrameWait;
  std::vector<uint8_t> buf(65536);
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < static_cast<ssize_t>(skip + 14 + payload.size())) continue;
    const uint8_t* eth = buf.data() + skip;
    if (((eth[12] << 8) | eth[13]) != kTestEtherType) continue;
    if (std::memcmp(eth + 14, payload.data(), payload.size()) == 0) return true;
  }
  return false;
}

class TapRedirectTest : public testing::PodNetnsTest {
 protected:
  void TearDown() override {
    if (!HasFailure() && !IsSkipped() && NetnsAlive()) {
      TcView v = ReadTc(pod());
      EXPECT_EQ(v.tap_index, 0) << kTap << " leaked";
      EXPECT_FALSE(v.veth_ingress) << "an ingress qdisc leaked on " << kPodIf;
    }
    PodNetnsTest::TearDown();
  }
  bool NetnsAlive() const { return ::access(pod().c_str(), F_OK) == 0; }

  // An AF_PACKET socket on the veth's peer, in the host netns.
  UniqueFd HostPacketSocket() {
    auto guard = NetnsGuard::Enter(host());
    EXPECT_OK(guard);
    UniqueFd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL)));
    EXPECT_TRUE(fd.valid()) << std::strerror(errno);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(::if_nametoindex(kHostIf));
    EXPECT_NE(sll.sll_ifindex, 0);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll), 0) << std::strerror(errno);
    return fd;
  }
};

TEST_F(TapRedirectTest, CreateMakesTheTapAndRedirectsBothWays) {
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(r);
  EXPECT_GE(r->tap_fd(), 0);
  EXPECT_EQ(r->tap_name(), kTap);
  TcView v = ReadTc(pod());
  ASSERT_NE(v.tap_index, 0) << "no tap";
  EXPECT_EQ(v.tap_mtu, kPodMtu);
  EXPECT_TRUE(v.tap_up);
  EXPECT_TRUE(v.veth_ingress);
  EXPECT_TRUE(v.tap_ingress);
  EXPECT_EQ(v.veth_redirect_to, v.tap_index);
  EXPECT_EQ(v.tap_redirect_to, v.veth_index);
  ASSERT_OK(r->Remove());
}

TEST_F(TapRedirectTest, RemoveLeavesNoTapNoQdiscAndIsIdempotent) {
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(r);
  Status st = r->Remove();
  ASSERT_OK(st);
  EXPECT_EQ(r->tap_fd(), -1);
  TcView v = ReadTc(pod());
  EXPECT_EQ(v.tap_index, 0);
  EXPECT_FALSE(v.veth_ingress);
  EXPECT_OK(r->Remove());
}

TEST_F(TapRedirectTest, DestructorRemoves) {
  {
    auto r = TapRedirect::Create(pod(), kPodIf, kTap);
    ASSERT_OK(r);
    TapRedirect moved = std::move(*r);  // the moved-from object must not remove anything
    ASSERT_NE(ReadTc(pod()).tap_index, 0);
  }
  EXPECT_EQ(ReadTc(pod()).tap_index, 0);
}

TEST_F(TapRedirectTest, MissingVethFailsNamingNetnsAndInterface) {
  auto r = TapRedirect::Create(pod(), "nope0", kTap);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(pod()));
  EXPECT_THAT(r.status().message(), HasSubstr("nope0"));
  EXPECT_EQ(ReadTc(pod()).tap_index, 0);
}

TEST_F(TapRedirectTest, FailureMidwayRemovesTheTapAndKeepsOthersQdisc) {
  // Someone else's ingress qdisc on the veth: Create fails after making the tap.
  auto tc = testing::RunIn(pod(), {"tc", "qdisc", "add", "dev", kPodIf, "ingress"});
  ASSERT_TRUE(tc.ok() && tc->ok()) << (tc.ok() ? tc->err : tc.status().ToString());
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("veth eth0"));
  EXPECT_THAT(r.status().message(), HasSubstr("ingress qdisc"));
  TcView v = ReadTc(pod());
  EXPECT_EQ(v.tap_index, 0) << "tap left behind";
  EXPECT_TRUE(v.veth_ingress) << "the pre-existing qdisc must stay";
  auto del = testing::RunIn(pod(), {"tc", "qdisc", "del", "dev", kPodIf, "ingress"});
  ASSERT_TRUE(del.ok() && del->ok());
}

TEST_F(TapRedirectTest, ExistingInterfaceWithTheTapNameIsRefused) {
  // (veth: the host kernel may lack the dummy driver.)
  ASSERT_NO_FATAL_FAILURE(testing::IpIn(pod(), {"link", "add", kTap, "type", "veth", "peer", "name", "tap_capx"}));
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists) << r.status().ToString();
  EXPECT_FALSE(ReadTc(pod()).veth_ingress);
  ASSERT_NO_FATAL_FAILURE(testing::IpIn(pod(), {"link", "del", kTap}));
}

TEST_F(TapRedirectTest, TapNameWithoutPrefixIsRefused) {
  auto r = TapRedirect::Create(pod(), kPodIf, "tap0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(kTapPrefix));
}

TEST_F(TapRedirectTest, RemoveAfterTheNetnsIsGoneIsNotAnError) {
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(r);
  DestroyPodNetns();
  Status st = r->Remove();
  EXPECT_OK(st);
  EXPECT_EQ(r->tap_fd(), -1);
}

TEST_F(TapRedirectTest, FrameWrittenToTheTapLeavesThroughTheVethPeer) {
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(r);
  UniqueFd host_sock = HostPacketSocket();
  ASSERT_TRUE(host_sock.valid());
  int hdr = 0;
  ASSERT_EQ(::ioctl(r->tap_fd(), TUNGETVNETHDRSZ, &hdr), 0);
  EXPECT_EQ(hdr, 10) << "sizeof(struct virtio_net_hdr), the tun default";
  const std::string payload = "capsule tap->veth";
  std::vector<uint8_t> out(static_cast<size_t>(hdr), 0);  // no checksum or GSO hints
  auto frame = Frame(Mac("ff:ff:ff:ff:ff:ff"), Mac(kPodMac), payload);
  out.insert(out.end(), frame.begin(), frame.end());
  ASSERT_EQ(::write(r->tap_fd(), out.data(), out.size()), static_cast<ssize_t>(out.size())) << std::strerror(errno);
  EXPECT_TRUE(WaitForFrame(host_sock.get(), 0, payload)) << "the frame never reached " << kHostIf;
  ASSERT_OK(r->Remove());
}

TEST_F(TapRedirectTest, FrameSentIntoTheVethPeerIsReadFromTheTap) {
  auto r = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(r);
  UniqueFd host_sock = HostPacketSocket();
  ASSERT_TRUE(host_sock.valid());
  const std::string payload = "capsule veth->tap";
  auto frame = Frame(Mac(kPodMac), Mac("02:00:00:00:00:01"), payload);
  ASSERT_EQ(::send(host_sock.get(), frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()))
      << std::strerror(errno);
  int hdr = 0;
  ASSERT_EQ(::ioctl(r->tap_fd(), TUNGETVNETHDRSZ, &hdr), 0);
  EXPECT_TRUE(WaitForFrame(r->tap_fd(), static_cast<size_t>(hdr), payload)) << "the frame never reached the tap";
  ASSERT_OK(r->Remove());
}

}  // namespace
}  // namespace capsule::network
