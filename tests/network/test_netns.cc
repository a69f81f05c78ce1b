// TestNetns and helpers to run iproute2 in a netns.
#include "tests/network/test_netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "runtime/common/mount_table.h"
#include "tests/support/status_matchers.h"

namespace capsule::network::testing {
namespace {

std::string FindTool(const std::vector<std::string>& candidates) {
  for (const auto& p : candidates) {
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return candidates.front();  // the spawn error then names it
}

}  // namespace

Result<TestNetns> TestNetns::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0444);
  if (fd < 0) return ErrnoStatus("create " + path);
  ::close(fd);
  // A throwaway thread, so that no long-lived thread changes namespace.
  Status st;
  std::thread([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      st = ErrnoStatus("unshare(CLONE_NEWNET)");
    } else if (::mount("/proc/thread-self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      st = ErrnoStatus("bind-mount the new netns on " + path);
    }
  }).join();
  if (!st.ok()) {
    ::unlink(path.c_str());
    return st;
  }
  return TestNetns(path);
}

void TestNetns::Destroy() {
  if (path_.empty()) return;
  if (::umount2(path_.c_str(), MNT_DETACH) != 0) ADD_FAILURE() << "umount " << path_ << ": " << std::strerror(errno);
  ::unlink(path_.c_str());
  path_.clear();
}

Result<capsule::testing::CommandResult> RunIn(const std::string& netns_path, std::vector<std::string> argv) {
  std::vector<std::string> full = {FindTool({"/usr/bin/nsenter", "/bin/nsenter"}), "--net=" + netns_path};
  if (!argv.empty() && argv[0] == "ip") argv[0] = FindTool({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"});
  if (!argv.empty() && argv[0] == "tc") argv[0] = FindTool({"/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc"});
  full.insert(full.end(), argv.begin(), argv.end());
  return capsule::testing::RunCommand(full, std::chrono::seconds(10));
}

void IpIn(const std::string& netns_path, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunIn(netns_path, argv);
  ASSERT_OK(r);
  ASSERT_TRUE(r->ok()) << "ip " << ::testing::PrintToString(args) << " in " << netns_path << ": " << r->err;
}

bool HasMountsUnder(const std::string& dir) {
  auto mounts = capsule::MountsUnder(dir);
  return !mounts.ok() || !mounts->empty();
}

}  // namespace capsule::network::testing
