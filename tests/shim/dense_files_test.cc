// The dense device set's host side without a VM: the rootfs image cache key,
// the guest storages a container gets, the refusal of read-write host
// directories, and the bound on the host files copied at create (checked
// before anything is mounted). Images made from real mounts on real disks:
// shim_cri_dense_e2e_test.
#include "shim/task/dense_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/common/unique_fd.h"
#include "tests/shim/fakes/fake_mounter.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::task {
namespace {

TEST(DenseFilesTest, AContainerGetsItsLayersAsOverlaysOnATmpfsOfItsOwn) {
  auto s = DenseStorages("c1", "disk0", "disk1");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].driver(), "tmpfs");
  EXPECT_EQ(s[0].mount_point(), "/run/capsule/dense/c1/.rw");
  EXPECT_EQ(s[1].driver(), "blk");
  EXPECT_EQ(s[1].source(), "disk0");
  EXPECT_EQ(s[2].driver(), "overlay");
  EXPECT_EQ(s[2].source(), s[1].mount_point());
  EXPECT_EQ(s[2].mount_point(), DenseGuestPath("c1/rootfs"));
  EXPECT_EQ(s[3].source(), "disk1");
  EXPECT_EQ(s[4].mount_point(), DenseGuestPath("c1/mounts"));
  EXPECT_EQ(DenseStorages("c1", "disk0", "").size(), 3u) << "no host files, no second disk";
}

TEST(DenseFilesTest, AReadWriteHostDirectoryIsRefusedByName) {
  std::vector<ShareBind> binds = {{"/etc/hosts-of-pod", "c/mounts/0-hosts", false, {"rbind", "rw"}},
                                  {"/var/secret", "c/mounts/1-secret", true, {"rbind", "ro"}}};
  EXPECT_OK(RefuseSharedDirectories(binds)) << "files and read-only directories are copied";
  binds.push_back({"/srv/data", "c/mounts/2-data", true, {"rbind"}});
  Status st = RefuseSharedDirectories(binds);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("/srv/data is read-write"), std::string::npos) << st.message();
}

TEST(DenseFilesTest, AnEmptyDirIsKnownByTheKubeletsPathAndAFittingName) {
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~empty-dir/cache"), "cache");
  EXPECT_EQ(EmptyDirVolumeName("/data/k8s/pods/0c4e/volumes/kubernetes.io~empty-dir/my-vol.1"), "my-vol.1");
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~configmap/cfg"), "");
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~empty-dir/a/b"), "") << "a subdir";
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~empty-dir/.."), "");
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~empty-dir/"), "");
  EXPECT_EQ(EmptyDirVolumeName("/srv/volumes/kubernetes.io~empty-dir/cache"), "") << "not under a pod";
  EXPECT_EQ(EmptyDirVolumeName("/var/lib/kubelet/pods//volumes/kubernetes.io~empty-dir/cache"), "") << "no uid";
  EXPECT_EQ(EmptyDirVolumeName("/srv/cache"), "");
}

// Two mounts of one emptyDir (one read-only) become one local volume both
// bind; other binds stay as they were, still to be imaged or refused.
TEST(DenseFilesTest, EmptyDirBindsBecomeOneLocalVolumeEachAndLeaveTheRest) {
  const std::string ed = "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/cache";
  std::vector<ShareBind> binds = {{"/etc/hosts-of-pod", "c/mounts/0-hosts", false, {"rbind"}},
                                  {ed, "c/mounts/1-cache", true, {"rbind", "rw"}},
                                  {ed, "c/mounts/2-cache-ro", true, {"rbind", "ro"}},
                                  {"/srv/data", "c/mounts/3-data", true, {"rbind"}}};
  nlohmann::json spec = {{"mounts", nlohmann::json::array()}};
  for (const auto& b : binds) spec["mounts"].push_back({{"destination", "/d"}, {"source", DenseGuestPath(b.rel)}});
  auto storages = LocalVolumes(&binds, &spec);
  ASSERT_EQ(storages.size(), 1u);
  EXPECT_EQ(storages[0].driver(), "local");
  EXPECT_EQ(storages[0].source(), "cache");
  EXPECT_EQ(storages[0].mount_point(), "/run/capsule/volumes/cache");
  EXPECT_EQ(spec["mounts"][0]["source"], DenseGuestPath("c/mounts/0-hosts"));
  EXPECT_EQ(spec["mounts"][1]["source"], "/run/capsule/volumes/cache");
  EXPECT_EQ(spec["mounts"][2]["source"], "/run/capsule/volumes/cache");
  EXPECT_EQ(spec["mounts"][3]["source"], DenseGuestPath("c/mounts/3-data"));
  ASSERT_EQ(binds.size(), 2u);
  EXPECT_EQ(binds[0].host_source, "/etc/hosts-of-pod");
  EXPECT_EQ(binds[1].host_source, "/srv/data");
  EXPECT_FALSE(RefuseSharedDirectories(binds).ok()) << "the hostPath is still refused";
}

TEST(DenseFilesTest, HostFilesOverTheBoundAreRefusedBeforeAnythingIsMounted) {
  auto dir = TempDir::Create("dense-mounts");
  ASSERT_OK(dir);
  const std::string big = dir->Join("volume");
  ASSERT_OK(MkdirAll(big + "/sub"));
  {
    UniqueFd fd(::open((big + "/sub/huge").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(kMaxMountsBytes) + 1), 0);  // sparse: costs nothing
  }
  ASSERT_EQ(::symlink("/", (big + "/root-link").c_str()), 0);  // counted, never followed
  testing::FakeMounter mounter;
  Status st = MountsImage(&mounter, {{big, "c/mounts/0-volume", true, {"rbind", "ro"}}}, dir->Join("staging"), "c",
                          dir->Join("mounts.erofs"));
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find(big), std::string::npos) << st.message();
  EXPECT_TRUE(mounter.history().empty()) << "nothing is mounted for a refused container";
  EXPECT_FALSE(PathExists(dir->Join("staging")));
  EXPECT_FALSE(PathExists(dir->Join("mounts.erofs")));
}

TEST(DenseFilesTest, TheKubeletsTerminationMessageFilesAreFoundByTheirLayout) {
  const std::string file = "/var/lib/kubelet/pods/uid-1/containers/app/0a1b2c3d";
  std::vector<ShareBind> binds = {
      {file, "c1/mounts/0-termination-log", false, {"rbind", "rprivate"}},
      {"/var/lib/kubelet/pods/uid-1/etc-hosts", "c1/mounts/1-hosts", false, {"rbind"}},
      {"/var/lib/kubelet/pods/uid-1/containers/app/ro-one", "c1/mounts/2-x", false, {"rbind", "ro"}},
      {"/var/lib/kubelet/pods/uid-1/containers/app", "c1/mounts/3-dir", true, {"rbind", "ro"}},
      {"/tmp/containers/app/0a1b2c3d", "c1/mounts/4-y", false, {"rbind"}},
  };
  auto found = TerminationMessageFiles(binds);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].host_path, file);
  EXPECT_EQ(found[0].guest_path, DenseGuestPath("c1/mounts/0-termination-log"));
}

TEST(DenseFilesTest, ATerminationMessageReplacesTheFileBoundedAndNeverThroughALink) {
  ASSERT_OK_AND_ASSIGN(TempDir dir, TempDir::Create("termination"));
  const std::string file = dir.Join("msg");
  ASSERT_OK(WriteFile(file, "an older and longer message"));
  ASSERT_OK(WriteTerminationMessage(file, "bye"));
  EXPECT_EQ(ReadFile(file).value_or("?"), "bye");
  ASSERT_OK(WriteTerminationMessage(file, std::string(kMaxTerminationMessageBytes + 100, 'x')));
  EXPECT_EQ(ReadFile(file).value_or("").size(), kMaxTerminationMessageBytes);
  // A link in the file's place is refused; what it points at is untouched.
  const std::string target = dir.Join("target");
  ASSERT_OK(WriteFile(target, "keep"));
  ASSERT_EQ(::symlink(target.c_str(), dir.Join("link").c_str()), 0);
  EXPECT_REASON(WriteTerminationMessage(dir.Join("link"), "evil"), reason::kWrongFileType);
  EXPECT_EQ(ReadFile(target).value_or("?"), "keep");
  EXPECT_REASON(WriteTerminationMessage(dir.path(), "x"), reason::kWrongFileType);
  // A missing file is not made.
  EXPECT_EQ(WriteTerminationMessage(dir.Join("missing"), "x").code(), Code::kNotFound);
  EXPECT_FALSE(PathExists(dir.Join("missing")));
}

}  // namespace
}  // namespace capsule::shim::task
