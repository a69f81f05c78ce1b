// A guest kernel that behaves like a node's: a privileged container makes a
// bridge and iptables nat rules (nft and legacy, as service-mesh init
// containers do), and the kernel modules they need, which the guest image
// does not carry, are loaded on demand by the agent as the kernel's modprobe
// helper from the host's module tree in the share (config guest.modules).
// The rules then redirect the pod's traffic: the host reaches the pod's
// httpd on 8080 through ports 8081 and 8082. Modules outside the guest's
// allowlist do not load, for an unprivileged container's rare socket
// families or a privileged one's vcan link. One VM boot.
#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

class CriGuestModulesE2eTest : public CriE2eTest {
 protected:
  void SetUp() override {
    CriE2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    Status imported = ctrd_->ImportImage(TestImageTar("netadmin"), kCriNs);
    ASSERT_OK(imported);
  }
  // ExecSync that must succeed; its stdout.
  std::string MustRun(const std::string& id, const std::vector<std::string>& cmd) {
    auto r = cri_->ExecSync(id, cmd, 60);
    EXPECT_OK(r);
    if (!r.ok()) return "";
    EXPECT_EQ(r->exit_code, 0) << fmt::format("{}", fmt::join(cmd, " ")) << ": " << r->out << r->err;
    return r->out;
  }
};

bool Loaded(const std::string& proc_modules, const std::string& name) {
  return proc_modules.find("\n" + name + " ") != std::string::npos || proc_modules.rfind(name + " ", 0) == 0;
}

TEST_F(CriGuestModulesE2eTest, APrivilegedContainersBridgeAndNatRulesLoadTheirModulesOnDemandAndRedirectThePod) {
  v1::PodSandboxConfig pod = Pod("modules-pod", v1::POD);
  pod.mutable_linux()->mutable_security_context()->set_privileged(true);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto web = StartContainer(*pod_id, pod, "web",
                            {"sh", "-c",
                             fmt::format("mkdir -p /tmp/www; echo hello-redirected > /tmp/www/index.html; "
                                         "exec httpd -f -p {} -h /tmp/www",
                                         kHttpPort)});
  ASSERT_OK(web);
  ContainerOptions c;
  c.name = "netadmin";
  c.image = kNetadminImage;
  c.command = {"sleep", "3600"};
  c.log_path = "netadmin.log";
  c.privileged = true;
  auto net = cri_->CreateContainer(*pod_id, pod, c);
  ASSERT_OK(net);
  ASSERT_OK(cri_->StartContainer(*net));

  // Not in the image, not loaded at boot. Only ip_tables and ip6_tables,
  // which a node has loaded anyway and iptables-legacy cannot load itself,
  // came with the first container holding CAP_NET_ADMIN.
  const std::string before = MustRun(*net, {"cat", "/proc/modules"});
  for (const char* m : {"bridge", "nf_tables", "nf_nat", "iptable_nat"})
    EXPECT_FALSE(Loaded(before, m)) << m << " at boot:\n" << before;
  for (const char* m : {"ip_tables", "ip6_tables"}) EXPECT_TRUE(Loaded(before, m)) << m << ":\n" << before;

  MustRun(*net, {"ip", "link", "add", "br0", "type", "bridge"});
  EXPECT_NE(MustRun(*net, {"ip", "link", "show", "br0"}).find("br0"), std::string::npos);
  MustRun(*net, {"iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "8081", "-j", "REDIRECT",
                 "--to-ports", std::to_string(kHttpPort)});
  MustRun(*net, {"iptables-legacy", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "8082", "-j", "REDIRECT",
                 "--to-ports", std::to_string(kHttpPort)});

  const std::string after = MustRun(*net, {"cat", "/proc/modules"});
  for (const char* m : {"bridge", "nf_tables", "nft_chain_nat", "nf_nat", "ip_tables", "iptable_nat"})
    EXPECT_TRUE(Loaded(after, m)) << m << " not loaded:\n" << after;

  // The rules redirect the pod's traffic, as a mesh's init container's do.
  auto status = cri_->PodStatus(*pod_id);
  ASSERT_OK(status);
  const std::string ip = status->status().network().ip();
  for (uint16_t port : {uint16_t{8081}, uint16_t{8082}}) {
    Result<std::string> page = Unavailable("not tried");
    for (int i = 0; i < 60; ++i) {  // httpd may still be starting
      page = HttpGet(ip, port, milliseconds(5000));
      if (page.ok()) break;
      ::usleep(500 * 1000);
    }
    ASSERT_OK(page) << "port " << port << ": " << page.status().ToString();
    EXPECT_NE(page->find("hello-redirected"), std::string::npos) << *page;
  }

  // Outside the allowlist, privileged or not, nothing loads: an
  // unprivileged container's AF_ALG and AF_CAN sockets (the kernel asks for
  // net-pf-38 and net-pf-29) and a privileged vcan link. The helper says
  // so in the guest's kernel log, naming the module.
  ContainerOptions u;
  u.name = "prober";
  u.image = kNetadminImage;
  u.command = {"sleep", "3600"};
  u.log_path = "prober.log";
  auto prober = cri_->CreateContainer(*pod_id, pod, u);
  ASSERT_OK(prober);
  ASSERT_OK(cri_->StartContainer(*prober));
  for (auto [family, type] : {std::pair{"38", "5"}, std::pair{"29", "3"}}) {
    auto r = cri_->ExecSync(*prober, {"socket-probe", family, type}, 60);
    ASSERT_OK(r);
    EXPECT_EQ(r->exit_code, 1) << "family " << family << ": " << r->out << r->err;
    EXPECT_NE(r->out.find("not supported"), std::string::npos) << r->out;
  }
  auto vcan = cri_->ExecSync(*net, {"ip", "link", "add", "vc0", "type", "vcan"}, 60);
  ASSERT_OK(vcan);
  EXPECT_NE(vcan->exit_code, 0) << "a vcan link was made: " << vcan->out;
  const std::string refused = MustRun(*net, {"cat", "/proc/modules"});
  for (const char* m : {"af_alg", "can", "vcan"}) EXPECT_FALSE(Loaded(refused, m)) << m << " loaded:\n" << refused;
  const std::string kmsg = MustRun(*net, {"dmesg"});
  for (const char* m : {"module af_alg (asked for as 'net-pf-38')", "module can (asked for as 'net-pf-29')",
                        "module vcan (asked for as 'rtnl-link-vcan')"})
    EXPECT_NE(kmsg.find(m), std::string::npos) << m << " not in the guest's kernel log:\n" << kmsg;

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
