// Test environment for the container engine.
#include "tests/agent/engine/engine_fixture.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/reaper.h"
#include "runtime/common/subprocess.h"
#include "runtime/oci/spec_parser.h"
#include "tests/agent/support/busybox_rootfs.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

using namespace std::chrono_literals;

size_t CountFds() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d && ::readdir(d)) ++n;
  if (d) ::closedir(d);
  return n;
}

std::string DescribeFds() {
  std::string out;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    std::string link = std::string("/proc/self/fd/") + e->d_name;
    (void)!::readlink(link.c_str(), target, sizeof target - 1);
    out += std::string(e->d_name) + " -> " + target + "\n";
  }
  if (d) ::closedir(d);
  return out;
}

std::vector<std::string> ChildDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

// The rootfs lives until the test program's global tear-down, which also
// runs when main ends with _exit (engine_test_main.cc).
std::optional<TempDir>& RootfsDir() {
  static std::optional<TempDir> dir;
  return dir;
}

class RootfsEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { RootfsDir().reset(); }
};

[[maybe_unused]] ::testing::Environment* const kRootfsEnvironment =
    ::testing::AddGlobalTestEnvironment(new RootfsEnvironment);  // gtest owns it

std::string BuildRootfs() {
  auto d = TempDir::Create("capsule-engine-rootfs");
  if (!d.ok()) return "";
  RootfsDir() = std::move(*d);
  const std::string root = RootfsDir()->path();
  return agent::testing::BuildBusyboxRootfs(root).ok() ? root : "";
}

// The reaper thread handles exits one at a time, callbacks included: once a
// fresh child's status is in, callbacks for earlier exits (which may hold a
// Process for a moment after waking its waiters) have returned.
void ReaperBarrier() {
  SpawnOptions o;
  o.argv = {"/bin/true"};
  auto child = ChildProcess::Spawn(o);
  if (child.ok()) (void)child->Wait(10s);
}

}  // namespace

const std::string& BusyboxRootfs() {
  static const std::string root = BuildRootfs();
  return root;
}

std::string FindCgroup2Root() {
  if (const char* env = std::getenv("CAPSULE_TEST_CGROUP_ROOT")) return env;
  struct statfs st{};
  if (::statfs("/sys/fs/cgroup", &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC) return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/unified";
}

bool HasController(const std::string& root, const std::string& controller) {
  auto text = ReadFile(root + "/cgroup.controllers");
  if (!text.ok()) return false;
  std::istringstream in(*text);
  std::string c;
  while (in >> c) {
    if (c == controller) return true;
  }
  return false;
}

nlohmann::json DefaultSpec(const std::vector<std::string>& args) {
  return agent::testing::DefaultSpec(args, BusyboxRootfs());
}

oci::Spec Parse(const nlohmann::json& spec) {
  auto parsed = oci::ParseSpec(spec.dump());
  EXPECT_OK(parsed);
  return parsed.ok() ? *parsed : oci::Spec{};
}

std::string ReadUntil(const ProcessIoPtr& io, Stream stream, const std::string& needle) {
  std::string all;
  while (all.find(needle) == std::string::npos) {
    auto r = io->Read(stream, 4096);
    if (!r.ok() || r->eof) break;
    all += r->data;
  }
  return all;
}

std::pair<std::string, std::string> Drain(const ProcessIoPtr& io) {
  std::string err;
  std::thread t([&] {
    for (;;) {
      auto r = io->Read(Stream::kStderr, 65536);
      if (!r.ok() || r->eof) break;
      err += r->data;
    }
  });
  std::string out;
  for (;;) {
    auto r = io->Read(Stream::kStdout, 65536);
    if (!r.ok() || r->eof) break;
    out += r->data;
  }
  t.join();
  return {out, err};
}

void EngineTest::SetUp() {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the engine mounts, creates namespaces and cgroups";
  ASSERT_FALSE(BusyboxRootfs().empty()) << "could not build a busybox rootfs from /bin/busybox";
  ASSERT_OK(Reaper::Instance().Start());
  cgroup_root_ = FindCgroup2Root();
  cgroup_parent_ = "capsule-test-" + std::to_string(::getpid());
  EngineOptions options;
  options.cgroup_root = cgroup_root_;
  options.cgroup_parent = cgroup_parent_;
  options.setup_timeout = 30s;
  // In a guest (engine_vm_test) the agent sits at the initrd's root.
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  options.pod_holder_exe = build ? std::string(build) + "/agent/capsule-agent" : "/capsule-agent";
  auto sb = LinuxContainerManager::Create(options, Reaper::Instance());
  ASSERT_OK(sb);
  sandbox_ = std::move(*sb);
  mounts_before_ = OurMounts();
  fds_before_ = CountFds();
}

void EngineTest::TearDown() {
  if (!sandbox_) return;
  Status st = sandbox_->RemoveAll(10s);
  EXPECT_OK(st);
  EXPECT_EQ(OurMounts(), mounts_before_) << "mounts leaked into the test's mount namespace";
  ReaperBarrier();
  EXPECT_EQ(CountFds(), fds_before_) << "file descriptors leaked; open now:\n" << DescribeFds();
  const std::string parent = cgroup_root_ + "/" + cgroup_parent_;
  EXPECT_TRUE(ChildDirs(parent).empty()) << "cgroups left under " << parent;
  sandbox_.reset();
  ::rmdir(parent.c_str());
}

std::vector<std::string> EngineTest::OurMounts() const {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  const std::string rootfs = BusyboxRootfs();
  while (std::getline(in, line)) {
    if (line.find(rootfs) != std::string::npos || line.find(cgroup_parent_) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string EngineTest::CgroupDir(const std::string& id) const {
  return cgroup_root_ + "/" + cgroup_parent_ + "/" + id;
}

nlohmann::json EngineTest::WithCgroup(nlohmann::json spec, const std::string& id) const {
  spec["linux"]["cgroupsPath"] = "/" + cgroup_parent_ + "/" + id;
  return spec;
}

ContainerPtr EngineTest::StartContainer(const std::string& id, const nlohmann::json& spec, CreateOptions options) {
  auto c = sandbox_->Create(id, Parse(spec), options);
  EXPECT_OK(c);
  if (!c.ok()) return nullptr;
  auto pid = (*c)->Start();
  EXPECT_OK(pid);
  return *c;
}

ContainerPtr EngineTest::StartInPodOf(const std::string& anchor, const std::string& id,
                                      const std::vector<std::string>& args) {
  CreateOptions join;
  join.share_namespaces_from = anchor;
  join.share_types = {oci::NamespaceType::kPid, oci::NamespaceType::kIpc, oci::NamespaceType::kUts};
  auto spec = DefaultSpec(args);
  spec["hostname"] = "";
  return StartContainer(id, spec, join);
}

RunResult EngineTest::Run(const std::string& id, const nlohmann::json& spec) {
  RunResult r;
  ContainerPtr c = StartContainer(id, spec);
  if (!c) return r;
  auto io = c->Io("");
  EXPECT_OK(io);
  (void)(*io)->CloseStdin();
  std::tie(r.out, r.err) = Drain(*io);
  auto exit = c->Wait("");
  EXPECT_OK(exit);
  if (exit.ok()) r.exit = *exit;
  Status st = sandbox_->Remove(id, 10s);
  EXPECT_OK(st);
  return r;
}

}  // namespace capsule::engine::testing
