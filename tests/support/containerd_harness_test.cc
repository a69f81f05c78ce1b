// The harness itself: it starts a private containerd that answers, passes
// config and environment through, configures CRI and CNI for this host when
// asked, restarts on the same state, and leaves nothing behind (shims,
// mounts, pod netns, its bridge), even when start-up fails.
#include "tests/support/containerd_harness.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "runtime/host/daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using namespace std::chrono_literals;

bool ProcessIsContainerd(pid_t pid) {
  auto comm = ReadFile("/proc/" + std::to_string(pid) + "/comm");
  return comm.ok() && comm->rfind("containerd", 0) == 0;
}

TEST(ContainerdHarnessTest, StartsPrivateDaemonAndCleansUpCompletely) {
  ContainerdOptions o;
  o.env = {{"CAPSULE_HARNESS_PROBE", "yes"}};
  // An extra plugin section using @DIR@, as CRI/CNI set-ups will.
  o.extra_toml = {"[plugins.\"io.containerd.snapshotter.v1.native\"]\n  root_path = \"@DIR@/native\""};
  auto h = ContainerdHarness::Start(o);
  ASSERT_OK(h);
  const std::string dir = (*h)->dir();
  const pid_t pid = (*h)->pid();

  auto config = ReadFile((*h)->config_path());
  ASSERT_OK(config);
  EXPECT_NE(config->find("root_path = \"" + dir + "/native\""), std::string::npos) << *config;
  auto environ = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  ASSERT_OK(environ);
  EXPECT_NE(environ->find(std::string("CAPSULE_HARNESS_PROBE=yes\0", 26)), std::string::npos);

  auto plugins = (*h)->Ctr({"plugins", "ls"});
  ASSERT_TRUE(plugins.ok() && plugins->ok());
  EXPECT_NE(plugins->out.find("io.containerd.grpc.v1           events"), std::string::npos);
  EXPECT_EQ(plugins->out.find(" cri "), std::string::npos) << "CRI should be disabled";
  EXPECT_TRUE(PathExists(dir + "/native"));  // the extra section took effect

  // A mount left behind by a test must not stop the clean-up.
  ASSERT_OK(MkdirAll(dir + "/leftover-mount"));
  ASSERT_EQ(::mount("tmpfs", (dir + "/leftover-mount").c_str(), "tmpfs", 0, "size=1m"), 0);

  h->reset();
  EXPECT_FALSE(PathExists(dir));
  EXPECT_FALSE(ProcessIsContainerd(pid));
}

TEST(ContainerdHarnessTest, FailedStartReportsLogAndLeavesNothing) {
  auto parent = TempDir::Create("harness-parent");
  ASSERT_OK(parent);
  ContainerdOptions o;
  o.temp_parent = parent->path();
  o.extra_toml = {"[plugins.\"io.containerd.grpc.v1.cri\"\nthis is not toml"};
  auto h = ContainerdHarness::Start(o);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("log"), std::string::npos) << h.status().ToString();
  EXPECT_TRUE(std::filesystem::is_empty(parent->path()));
}

TEST(ContainerdHarnessTest, CtrReportsFailuresWithOutput) {
  auto h = ContainerdHarness::Start();
  ASSERT_OK(h);
  auto r = (*h)->Ctr({"-n", "nope", "containers", "info", "missing"});
  ASSERT_OK(r);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->err.find("not found"), std::string::npos) << r->err;
  EXPECT_TRUE((*h)->Stop().ok());
  EXPECT_TRUE((*h)->Stop().ok());  // idempotent
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Ip() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "ip";
}

// `ip args...`; the error carries ip's stderr.
Status RunIp(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {Ip()};
  argv.insert(argv.end(), args.begin(), args.end());
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, 10s));
  if (!r.ok()) return Internal("ip " + args[0] + " " + args[1] + ": " + r.err);
  return Status::Ok();
}

TEST(ContainerdHarnessTest, CriAndCniAreConfiguredForThisHostAndSurviveARestart) {
  auto shim_dir = TempDir::Create("harness-shims");
  ASSERT_OK(shim_dir);
  ContainerdOptions o;
  o.path_prepend = {shim_dir->path()};
  o.cri.emplace();
  o.cri->cni = true;
  o.cri->runtimes = {{"probe", "io.containerd.probe.v2", {{"ConfigPath", "/etc/probe \"quoted\".yaml"}}}};
  auto h = ContainerdHarness::Start(o);
  ASSERT_OK(h);
  ContainerdHarness& c = **h;

  auto plugins = c.CtrOutput({"plugins", "ls"});
  ASSERT_OK(plugins);
  EXPECT_TRUE(std::regex_search(*plugins, std::regex("io\\.containerd\\.grpc\\.v1 +cri +[^\\n]* ok")))
      << "CRI should be enabled and initialised:\n" << *plugins;
  auto config = ReadFile(c.config_path());
  ASSERT_OK(config);
  for (const std::string& want :
       {std::string("sandbox_image = \"capsule.test/pause:latest\""), std::string("restrict_oom_score_adj = true"),
        std::string("SystemdCgroup = false"), std::string("snapshotter = \"overlayfs\""),
        std::string("bin_dir = \"/usr/lib/cni\""), "conf_dir = \"" + c.cni_conf_dir() + "\"",
        std::string("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.probe]"),
        std::string("ConfigPath = \"/etc/probe \\\"quoted\\\".yaml\"")}) {
    EXPECT_NE(config->find(want), std::string::npos) << want << " not in\n" << *config;
  }
  EXPECT_EQ(config->find("\"io.containerd.grpc.v1.cri\", "), std::string::npos) << "CRI is not disabled";

  ASSERT_TRUE(c.cni().has_value());
  const CniNetwork net = *c.cni();
  EXPECT_TRUE(std::regex_match(net.bridge, std::regex("capbr[0-9a-f]{6}"))) << net.bridge;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(net.subnet, m, std::regex("10\\.(20[0-7])\\.(\\d+)\\.0/24"))) << net.subnet;
  EXPECT_EQ(net.gateway, "10." + m[1].str() + "." + m[2].str() + ".1");
  auto conflist = ReadFile(c.cni_conf_dir() + "/10-capsule-test.conflist");
  ASSERT_OK(conflist);
  for (const std::string& want : {"\"bridge\": \"" + net.bridge + "\"", "\"dataDir\": \"" + c.dir() + "/cni-ipam\"",
                                  "\"subnet\": \"" + net.subnet + "\"", std::string("\"type\": \"loopback\""),
                                  std::string("\"ipMasq\": false"), std::string("\"isGateway\": true")}) {
    EXPECT_NE(conflist->find(want), std::string::npos) << want << " not in\n" << *conflist;
  }
  auto environ = ReadFile("/proc/" + std::to_string(c.pid()) + "/environ");
  ASSERT_OK(environ);
  EXPECT_NE(environ->find(std::string("\0PATH=", 6) + shim_dir->path() + ":"), std::string::npos);
  EXPECT_TRUE(c.Leaks().empty()) << c.Leaks().front();

  // Restart: same dir, config and log (appended), a new daemon that serves.
  const pid_t before = c.pid();
  ASSERT_OK(c.CtrOutput({"namespaces", "create", "kept"}));
  Status restarted = c.Restart();
  ASSERT_OK(restarted);
  EXPECT_NE(c.pid(), before);
  auto namespaces = c.CtrOutput({"namespaces", "ls"});
  ASSERT_OK(namespaces);
  EXPECT_NE(namespaces->find("kept"), std::string::npos) << "state survives: " << *namespaces;
  EXPECT_EQ(ReadFile(c.config_path()).value_or(""), *config);
  const std::string log = ReadFile(c.log_path()).value_or("");
  size_t boots = 0;
  for (size_t pos = 0; (pos = log.find("containerd successfully booted", pos)) != std::string::npos; ++pos) ++boots;
  EXPECT_EQ(boots, 2u) << c.LogTail();
  EXPECT_EQ(c.ImportImage("/nonexistent.tar").code(), Code::kInternal);
  EXPECT_NE(c.ImportImage("/nonexistent.tar").message().find("/nonexistent.tar"), std::string::npos);
}

TEST(ContainerdHarnessTest, LeaksAreReportedAndStopRemovesShimsMountsAndTheBridge) {
  ContainerdOptions o;
  o.cri.emplace();
  o.cri->cni = true;
  auto h = ContainerdHarness::Start(o);
  ASSERT_OK(h);
  const std::string dir = (*h)->dir();
  const std::string bridge = (*h)->cni()->bridge;
  const std::string veth = "capv" + bridge.substr(5);

  // A "shim": a daemon (not our child, as containerd's shims are not)
  // whose command line names the harness's address.
  DaemonOptions shim;
  shim.argv = {"/bin/bash", "-c", "exec -a \"$0\" sleep 600", (*h)->grpc_address()};
  auto daemon = SpawnDaemon(shim);
  ASSERT_OK(daemon);
  ASSERT_OK(MkdirAll(dir + "/leak-mount"));
  ASSERT_EQ(::mount("tmpfs", (dir + "/leak-mount").c_str(), "tmpfs", 0, "size=1m"), 0);
  // The bridge as CNI makes it, with a port a pod's veth would leave.
  ASSERT_OK(RunIp({"link", "add", bridge, "type", "bridge"}));
  Status port = RunIp({"link", "add", veth, "type", "veth", "peer", "name", veth + "p"});
  ASSERT_OK(port);
  ASSERT_OK(RunIp({"link", "set", veth, "master", bridge}));

  const std::vector<std::string> leaks = (*h)->Leaks();
  EXPECT_EQ(leaks.size(), 3u) << ::testing::PrintToString(leaks);
  const std::string process = "process " + std::to_string(daemon->pid) + ": ";
  EXPECT_TRUE(std::any_of(leaks.begin(), leaks.end(), [&](const std::string& l) { return l.rfind(process, 0) == 0; }))
      << ::testing::PrintToString(leaks);
  EXPECT_TRUE(Contains(leaks, "mount " + dir + "/leak-mount")) << ::testing::PrintToString(leaks);
  EXPECT_TRUE(Contains(leaks, "port " + veth + " on bridge " + bridge)) << ::testing::PrintToString(leaks);

  Status stopped = (*h)->Stop();
  EXPECT_OK(stopped);
  EXPECT_TRUE(PidfdWait(daemon->pidfd.get(), 0)) << "the leftover shim was killed";
  EXPECT_FALSE(PathExists("/sys/class/net/" + bridge)) << "the bridge was deleted";
  EXPECT_FALSE(PathExists(dir));
  (void)RunIp({"link", "del", veth});  // the bridge's deletion left the veth detached
}

TEST(ContainerdHarnessTest, OnlyOurNetnsMadeSinceStartAreLeaksAndCleanUpRemovesThem) {
  auto netns = TempDir::Create("harness-netns");
  ASSERT_OK(netns);
  auto dir = TempDir::Create("harness-scope");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(netns->Join("cni-old"), ""));
  LeakScope scope;
  scope.address = dir->Join("containerd.sock");
  scope.dir = dir->path();
  scope.bridge = "capbrnone00";  // never created: its deletion is a no-op
  scope.netns_dir = netns->path();
  scope.netns_before = DirEntries(netns->path());
  ASSERT_OK(WriteFile(netns->Join("cni-new"), ""));
  ASSERT_OK(WriteFile(netns->Join("other"), ""));
  // Another test's containerd made this one: our metadata does not name it.
  ASSERT_OK(WriteFile(netns->Join("cni-foreign"), ""));
  scope.metadata_db = dir->Join("meta.db");
  ASSERT_OK(WriteFile(scope.metadata_db, "\x01bolt{\"NetNSPath\":\"/var/run/netns/cni-new\"}\x02"));

  const ContainerdLeaks leaks = ScanLeaks(scope);
  EXPECT_EQ(leaks.netns, std::vector<std::string>{netns->Join("cni-new")});
  EXPECT_TRUE(leaks.processes.empty() && leaks.mounts.empty() && leaks.bridge_ports.empty());
  EXPECT_EQ(leaks.Describe(scope), std::vector<std::string>{"netns " + netns->Join("cni-new")});
  Status cleaned = CleanUpLeaks(scope);
  EXPECT_OK(cleaned);
  EXPECT_FALSE(PathExists(netns->Join("cni-new")));
  EXPECT_TRUE(PathExists(netns->Join("cni-old")));
  EXPECT_TRUE(PathExists(netns->Join("cni-foreign"))) << "another test's netns is left alone";
  EXPECT_TRUE(ScanLeaks(scope).empty());
}

}  // namespace
}  // namespace capsule::testing
