// The dense device set (guest.device_set: dense) through a real containerd
// 1.6, real QEMU and capsule-poold: a CRI pod runs on a copy-on-write clone
// of the pool's template (QEMU maps the template's sealed RAM private; no
// virtiofsd, no vhost-user device), its container's rootfs is an erofs image
// of the busybox layers on a SCSI disk with a writable overlay in the
// guest, CRI's /etc/hosts and friends come in an image of their own and are
// writable in the guest, a second pod of the same image reuses the cached
// rootfs image, an emptyDir is a directory in guest memory that the pod's
// containers share, a read-write host directory is refused by name, and the
// container's termination message reaches the kubelet's host file. The
// fixture's leak check runs after the pool daemon stopped: no shim, QEMU,
// capsule-vsockd, mount, disk image of a container's own or VM dir is left.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::seconds;
constexpr seconds kBootBudget{120};

class CriDenseE2eTest : public CriPoolFixture {
 protected:
  void SetUp() override {
    ::setenv("CAPSULE_E2E_DEVICE_SET", "dense", 1);
    CriE2eTest::SetUp();
  }
  void TearDown() override {
    (void)StopPool();
    ::unsetenv("CAPSULE_E2E_DEVICE_SET");
    if (!env_) return;
    CriE2eTest::TearDown();
  }
  std::vector<std::string> Images() {
    std::vector<std::string> out;
    for (const auto& e : DirEntries(env_->image_cache_dir()))
      if (e.size() > 6 && e.substr(e.size() - 6) == ".erofs") out.push_back(e);
    return out;
  }
  Result<std::string> Exec(const std::string& id, const std::string& script) {
    auto r = cri_->ExecSync(id, {"sh", "-c", script}, 60);
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) return Internal(fmt::format("exit {}: {}{}", r->exit_code, r->out, r->err));
    return r->out;
  }
};

TEST_F(CriDenseE2eTest, APodRunsOnACopyOnWriteCloneWithItsFilesOnErofsDisks) {
  StartPool();
  ASSERT_OK(pool_->WaitReady(1, kBootBudget)) << pool_->log();
  EXPECT_OK(pool_->WaitForLog("rehearsed a container's start in", seconds(10)))
      << "the dense clone was offered without its rehearsal: " << pool_->log();
  const v1::PodSandboxConfig pod = Pod("capsule-dense", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  std::string log = ctrd_->LogTail(8 << 20);
  EXPECT_NE(log.find("sandbox " + *pod_id + ": claimed pooled VM"), std::string::npos) << "the pod cold-booted";
  // The pool says what its VMs are made of and what they cost.
  auto st = pool_->WaitReady(1, kBootBudget, /*settled=*/true);
  ASSERT_OK(st);
  ASSERT_FALSE(st->shapes.empty());
  EXPECT_EQ(st->shapes[0].device_set, "dense");
  EXPECT_GE(st->shapes[0].template_shared_bytes, 16ull << 20) << "the template's sealed RAM";
  EXPECT_GT(st->shapes[0].idle_vm_own_bytes, 0u);
  EXPECT_LT(st->shapes[0].idle_vm_own_bytes, st->shapes[0].idle_vm_rss_bytes)
      << "a clone's QEMU maps template pages it does not own";

  // The VM: a clone mapping the template's sealed RAM private, no virtio-fs.
  const pid_t vmm = VmmOf(*pod_id);
  ASSERT_GT(vmm, 0);
  auto cmdline = ReadFile("/proc/" + std::to_string(vmm) + "/cmdline");
  ASSERT_OK(cmdline);
  EXPECT_NE(cmdline->find("share=off"), std::string::npos);
  EXPECT_EQ(cmdline->find("vhost-user"), std::string::npos);
  auto maps = ReadFile("/proc/" + std::to_string(vmm) + "/maps");
  ASSERT_OK(maps);
  const size_t ram = maps->find("memfd:capsule-template-");
  ASSERT_NE(ram, std::string::npos) << "QEMU does not map the template's sealed RAM";
  const size_t line = maps->rfind('\n', ram) + 1;
  const std::string mapping = maps->substr(line, maps->find('\n', ram) - line);
  EXPECT_NE(mapping.find(" rw-p "), std::string::npos) << "the template's RAM is not mapped private: " << mapping;
  for (const auto& [pid, cmd] : E2eEnv::Processes({"virtiofsd"}))
    EXPECT_EQ(cmd.find(env_->state_dir()), std::string::npos) << "a dense VM has a virtiofsd: " << cmd;

  auto c1 = StartContainer(*pod_id, pod, "one", {"sh", "-c", "echo from-the-rootfs > /written; exec sleep 3600"});
  ASSERT_OK(c1);
  EXPECT_EQ(Images().size(), 1u) << "one rootfs image for the busybox layers";
  log = ctrd_->LogTail(8 << 20);
  EXPECT_NE(log.find("rootfs image " + env_->image_cache_dir()), std::string::npos);
  // The rootfs is an overlay (erofs below, guest memory above) and takes writes.
  auto root = Exec(*c1, "for i in $(seq 100); do [ -e /written ] && break; sleep 0.1; done; cat /written; "
                        "awk '$2==\"/\"{print $3}' /proc/mounts; ls /bin/busybox");
  ASSERT_OK(root);
  EXPECT_EQ(*root, "from-the-rootfs\noverlay\n/bin/busybox\n");
  // CRI's host files came along, readable and writable in the guest.
  auto hosts = Exec(*c1, "grep -c localhost /etc/hosts; cat /etc/hostname; echo 10.9.9.9 extra >> /etc/hosts && "
                         "grep -c extra /etc/hosts");
  ASSERT_OK(hosts);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  // containerd names a pod without a hostname after the node.
  EXPECT_EQ(*hosts, fmt::format("1\n{}\n1\n", host)) << "CRI's /etc/hosts and /etc/hostname in the guest";

  // A second pod of the same image: the cached rootfs image serves it.
  const v1::PodSandboxConfig pod2 = Pod("capsule-dense-2", v1::POD);
  auto pod2_id = RunPod(pod2);
  ASSERT_OK(pod2_id);
  auto c2 = StartContainer(*pod2_id, pod2, "two", {"sleep", "3600"});
  ASSERT_OK(c2);
  EXPECT_EQ(Images().size(), 1u) << ::testing::PrintToString(Images());
  log = ctrd_->LogTail(8 << 20);
  EXPECT_NE(log.find("(cached,"), std::string::npos) << "the second pod's rootfs image was built again";
  auto other = Exec(*c2, "cat /written 2>/dev/null || echo none");
  ASSERT_OK(other);
  EXPECT_EQ(*other, "none\n") << "a pod's writes reached the shared image";

  // A container of the second pod with one host path mounted.
  auto with_mount = [&](const std::string& name, std::vector<std::string> command, const std::string& host_path,
                        const std::string& container_path, bool read_only) {
    cri::ContainerOptions o;
    o.name = name;
    o.image = kBusyboxImage;
    o.command = std::move(command);
    o.log_path = name + ".log";
    v1::ContainerConfig cc = cri::MakeContainerConfig(o);
    *cc.mutable_linux()->mutable_security_context()->mutable_namespace_options() =
        pod2.linux().security_context().namespace_options();
    auto* m = cc.add_mounts();
    m->set_host_path(host_path);
    m->set_container_path(container_path);
    m->set_readonly(read_only);
    return cri_->CreateContainer(*pod2_id, pod2, cc);
  };

  // A read-write host directory cannot be shared: refused by name.
  const std::string data = env_->dir() + "/hostdata";
  ASSERT_OK(MkdirAll(data));
  ASSERT_OK(WriteFile(data + "/f", "x"));
  auto created = with_mount("rw-volume", {"sleep", "3600"}, data, "/data", false);
  ASSERT_OK(created);  // CRI makes the task at start
  Status refused = cri_->StartContainer(*created);
  EXPECT_FALSE(refused.ok()) << "a read-write host directory was accepted";
  EXPECT_NE(refused.message().find(data + " is read-write"), std::string::npos) << refused.ToString();
  EXPECT_OK(cri_->RemoveContainer(*created));
  // The refused container left the pod working.
  auto still = Exec(*c2, "echo alive");
  ASSERT_OK(still);

  // An emptyDir lives in the guest: one directory the pod's containers
  // share (one of them read-only), kept when the container that wrote it is
  // replaced, and never written through to the host's directory.
  const std::string empty_dir = env_->dir() + "/kubelet/pods/uid-2/volumes/kubernetes.io~empty-dir/cache";
  ASSERT_OK(MkdirAll(empty_dir));
  auto with_cache = [&](const std::string& name, bool read_only, std::vector<std::string> command) {
    return with_mount(name, std::move(command), empty_dir, "/cache", read_only);
  };
  auto writer = with_cache("writer", false, {"sh", "-c", "echo shared > /cache/note; exec sleep 3600"});
  ASSERT_OK(writer);
  ASSERT_OK(cri_->StartContainer(*writer));
  auto reader = with_cache("reader", true, {"sleep", "3600"});
  ASSERT_OK(reader);
  ASSERT_OK(cri_->StartContainer(*reader));
  auto seen = Exec(*reader, "for i in $(seq 100); do [ -e /cache/note ] && break; sleep 0.1; done; cat /cache/note; "
                            "touch /cache/mine 2>/dev/null && echo wrote || echo read-only");
  ASSERT_OK(seen);
  EXPECT_EQ(*seen, "shared\nread-only\n") << "the reader does not see the writer's emptyDir";
  ASSERT_OK(cri_->StopContainer(*writer, 5));
  ASSERT_OK(cri_->RemoveContainer(*writer));
  auto again = with_cache("writer-2", false, {"sleep", "3600"});
  ASSERT_OK(again);
  ASSERT_OK(cri_->StartContainer(*again));
  auto kept = Exec(*again, "cat /cache/note; stat -c %a /cache");
  ASSERT_OK(kept);
  EXPECT_EQ(*kept, "shared\n777\n") << "the emptyDir did not outlive the container that wrote it";
  EXPECT_TRUE(DirEntries(empty_dir).empty()) << "guest writes reached the host's emptyDir";

  // The termination message: the container writes the guest's copy of the
  // kubelet's file; by the time containerd reports the exit, the host's
  // file has it (the kubelet reads it from there).
  const std::string message_file = env_->dir() + "/kubelet/pods/uid-2/containers/last-words/0a1b2c3d";
  ASSERT_OK(MkdirAll(env_->dir() + "/kubelet/pods/uid-2/containers/last-words"));
  ASSERT_OK(WriteFile(message_file, ""));
  auto last = with_mount("last-words", {"sh", "-c", "printf 'bye from the guest' > /dev/termination-log; exit 3"},
                         message_file, "/dev/termination-log", false);
  ASSERT_OK(last);
  ASSERT_OK(cri_->StartContainer(*last));
  // A bound for a hang, not a speed check.
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  auto lst = cri_->ContainerStatus(*last);
  while (lst.ok() && lst->status().state() != v1::CONTAINER_EXITED && std::chrono::steady_clock::now() < deadline) {
    ::usleep(100 * 1000);
    lst = cri_->ContainerStatus(*last);
  }
  ASSERT_OK(lst);
  ASSERT_EQ(lst->status().state(), v1::CONTAINER_EXITED);
  EXPECT_EQ(lst->status().exit_code(), 3);
  EXPECT_EQ(ReadFile(message_file).value_or("?"), "bye from the guest")
      << "the termination message stayed in the guest";
  EXPECT_OK(cri_->RemoveContainer(*last));

  for (const auto& id : {*pod_id, *pod2_id}) {
    ASSERT_OK(cri_->StopPod(id));
    ASSERT_OK(cri_->RemovePod(id));
  }
  // Only the cache's image stays: the mounts images were the containers' own.
  EXPECT_EQ(Images().size(), 1u) << ::testing::PrintToString(Images());
  for (const auto& e : DirEntries(env_->image_cache_dir()))
    EXPECT_EQ(e.find("ctr-"), std::string::npos) << "left: " << e;
}

}  // namespace
}  // namespace capsule::testing
