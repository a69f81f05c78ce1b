// Capsule as a CRI runtime handler of a real containerd 1.6: one pod = one
// real QEMU microVM (five boots in all). A pod on a CNI bridge network
// (Debian's bridge + host-local + loopback plugins) with two busybox
// containers sharing its pid namespace: the pod IP CNI gave answers from
// inside the VM (host -> pod HTTP, pod -> gateway ping), ExecSync, status,
// logs at the CRI log path, stats, StopContainer, Stop/RemovePodSandbox;
// the pod's NIC plugged at VM boot (guest.boot_nic) or hot-plugged; a
// containerd restart while a pod runs (the shim is reconnected through
// its address file and the pod still answers and stops); execs that cannot
// start fail at once; pods asking for a host namespace are refused; a
// SIGTERMed shim exits and takes its VM along; a SIGKILLed QEMU ends every
// container of its pod, which still stops and is removed; a log reopen, an
// ExecSync past its timeout, a resource update and a new container in a
// pod whose container exited; `capsule-runtime ps` and the metrics
// endpoint name a running pod. Nothing of ours is left
// after each: no process (shim included), mount, VM dir, socket, pod netns
// or port on the test bridge. containerd is the shared ContainerdHarness
// with CRI configured for this host and a CNI bridge.
#include "runtime/common/backoff.h"
#include "tests/e2e/cri_e2e_fixture.h"

#include <signal.h>
#include <sys/mount.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

Result<std::string> HttpGetOnceListening(const std::string& ip) {
  Result<std::string> page = Unavailable("not tried");
  for (int i = 0; i < 100; ++i) {  // until httpd listens (30 s at most)
    page = HttpGet(ip, kHttpPort, milliseconds(5000));
    if (page.ok() || page.status().code() == Code::kDeadlineExceeded) break;
    ::usleep(300 * 1000);
  }
  return page;
}

TEST_F(CriE2eTest, PodOnACniNetworkWithTwoContainersExecLogsStatsAndStop) {
  const v1::PodSandboxConfig pod = Pod("capsule-pod", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto pstatus = cri_->PodStatus(*pod_id);
  ASSERT_OK(pstatus);
  EXPECT_EQ(pstatus->status().state(), v1::SANDBOX_READY);
  ExpectVmmInPodCgroup(*pod_id);
  const std::string pod_ip = pstatus->status().network().ip();
  const std::string subnet_prefix = ctrd_->cni()->gateway.substr(0, ctrd_->cni()->gateway.rfind('.') + 1);
  ASSERT_EQ(pod_ip.rfind(subnet_prefix, 0), 0u) << "pod IP " << pod_ip << " not in " << ctrd_->cni()->subnet;

  auto c1 = StartContainer(*pod_id, pod, "one",
                           {"sh", "-c",
                            fmt::format("echo started-one; mkdir -p /tmp/www; echo hello-from-pod > /tmp/www/index.html; "
                                        "exec httpd -f -p {} -h /tmp/www",
                                        kHttpPort)});
  ASSERT_OK(c1);
  auto c2 = StartContainer(*pod_id, pod, "two", {"sleep", "3601"});
  ASSERT_OK(c2);

  // The pod's IP is the VM's: the host reaches a server in the guest
  // through the bridge, the veth, the tc mirror and the VM's NIC.
  const std::string shim_log = ctrd_->LogTail(8 << 20);
  EXPECT_NE(shim_log.find("(boot NIC, taken over in"), std::string::npos) << "the boot NIC was not used";
  // One guest call sets the pod up, and the sandbox container is the
  // guest's pod holder: no pause image, no process made for it.
  EXPECT_NE(shim_log.find("in 1 guest round trip(s)"), std::string::npos) << "the pod's set-up took more than one guest call";
  EXPECT_NE(shim_log.find("container " + *pod_id + " is the pod holder in the guest"), std::string::npos)
      << "the sandbox container was not the pod holder";
  auto page = HttpGetOnceListening(pod_ip);
  ASSERT_OK(page);
  EXPECT_NE(page->find("hello-from-pod"), std::string::npos) << *page;
  // And the guest sees the CNI address on eth0 and reaches the gateway.
  auto exec = cri_->ExecSync(*c2, {"ip", "-4", "addr", "show", "eth0"}, 30);
  ASSERT_OK(exec);
  EXPECT_NE(exec->out.find("inet " + pod_ip + "/24"), std::string::npos) << exec->out << exec->err;
  exec = cri_->ExecSync(*c2, {"ping", "-c", "1", "-W", "5", ctrd_->cni()->gateway}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 0) << exec->out << exec->err;

  auto cstatus = cri_->ContainerStatus(*c1);
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_RUNNING);

  exec = cri_->ExecSync(*c1, {"echo", "hi"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 0);
  EXPECT_EQ(exec->out, "hi\n");
  exec = cri_->ExecSync(*c1, {"sh", "-c", "echo oops >&2; exit 3"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 3);
  EXPECT_EQ(exec->err, "oops\n");

  // One pid namespace per pod (CRI's default): "two" sees "one"'s sleep.
  exec = cri_->ExecSync(*c2, {"ps"}, 30);
  ASSERT_OK(exec);
  EXPECT_NE(exec->out.find("httpd -f"), std::string::npos) << exec->out;
  EXPECT_NE(exec->out.find("sleep 3601"), std::string::npos) << exec->out;

  auto stats = cri_->ListContainerStats(*pod_id);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->size(), 2u);

  // `capsule-runtime ps` names the pod as the kubelet knows it, with its VM.
  auto ps = RunCommand({std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime", "--config",
                        env_->config_path(), "ps", "--json"},
                       milliseconds(30000));
  ASSERT_OK(ps);
  ASSERT_TRUE(ps->ok()) << ps->out << ps->err;
  const auto listed = nlohmann::json::parse(ps->out, nullptr, false);
  ASSERT_TRUE(listed.is_array() && listed.size() == 1u) << ps->out;
  const auto& entry = listed[0];
  EXPECT_EQ(entry["pod"]["sandbox_id"], *pod_id) << ps->out;
  EXPECT_EQ(entry["pod"]["pod_name"], "capsule-pod") << ps->out;
  EXPECT_EQ(entry["pod"]["pod_namespace"], "default") << ps->out;
  EXPECT_EQ(entry["pod"]["namespace"], "k8s.io") << ps->out;
  EXPECT_EQ(entry["vmm_pid"], VmmOf(*pod_id)) << ps->out;
  EXPECT_EQ(entry["vmm_running"], true) << ps->out;
  EXPECT_GT(entry["vmm_rss_bytes"].get<uint64_t>(), 32u << 20) << ps->out;

  // The metrics endpoint: the pod's series carry its CRI names, and its
  // guest answered with its own memory.
  const std::string runtime_cli = std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime";
  auto serve = StreamingCommand::Start({runtime_cli, "--config", env_->config_path(), "metrics", "serve", "--listen",
                                        "127.0.0.1:0"});
  ASSERT_OK(serve);
  auto serving = serve->WaitForOutput("/metrics\n", milliseconds(20000));
  ASSERT_OK(serving);
  const size_t port_at = serve->output().find("http://127.0.0.1:");
  ASSERT_NE(port_at, std::string::npos) << serve->output();
  const auto port = static_cast<uint16_t>(std::stoi(serve->output().substr(port_at + 17)));
  auto scrape = HttpGet("127.0.0.1", port, milliseconds(30000), "/metrics");
  ASSERT_OK(scrape);
  serve->Stop(milliseconds(5000));
  const std::string pod_labels = fmt::format("sandbox_id=\"{}\",pod=\"capsule-pod\",namespace=\"default\","
                                             "containerd_namespace=\"k8s.io\"", *pod_id);
  for (const char* series : {"capsule_guest_up{", "capsule_guest_memory_total_bytes{", "capsule_vm_start_seconds{",
                             "capsule_vm_process_resident_bytes{", "capsule_agent_rpc_duration_seconds_count{"}) {
    const size_t at = scrape->find(series);
    ASSERT_NE(at, std::string::npos) << series << " missing:\n" << *scrape;
    const std::string line = scrape->substr(at, scrape->find('\n', at) - at);
    EXPECT_NE(line.find(pod_labels), std::string::npos) << line;
  }
  EXPECT_NE(scrape->find("\",process=\"qemu\"} "), std::string::npos) << *scrape;
  EXPECT_NE(scrape->find("\",process=\"virtiofsd\"} "), std::string::npos) << *scrape;
  EXPECT_NE(scrape->find("\",process=\"shim\"} "), std::string::npos) << *scrape;
  // The shim's agent call histograms: its CreateContainer calls, by bucket.
  EXPECT_NE(scrape->find(",rpc=\"CreateContainer\",le=\"+Inf\"} "), std::string::npos) << *scrape;
  const size_t up = scrape->find("capsule_guest_up{");
  EXPECT_EQ(scrape->substr(scrape->find("} ", up) + 2, 1), "1") << "the guest did not answer";
  const size_t mem = scrape->find("capsule_guest_memory_total_bytes{");
  const double guest_mem = std::stod(scrape->substr(scrape->find("} ", mem) + 2));
  EXPECT_GT(guest_mem, 128.0 * (1 << 20)) << "a 256 MiB guest";
  EXPECT_LT(guest_mem, 256.0 * (1 << 20) + 1) << "a 256 MiB guest";

  ASSERT_OK(cri_->StopContainer(*c1, 2));
  cstatus = cri_->ContainerStatus(*c1);
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED);
  auto log = ReadFile(logs_ + "/one.log");
  ASSERT_OK(log);
  EXPECT_NE(log->find(" stdout F started-one"), std::string::npos) << *log;

  ASSERT_OK(cri_->RemoveContainer(*c1));
  // The guest let go of the container's share (its submounts and cached
  // inodes, which virtiofsd holds host fds for) before the shim unmounted
  // the rootfs and binds, so none needed a lazy detach. The removal ends
  // after its answer; its last line comes after any unmount's.
  auto removed = ctrd_->WaitForLog("container " + *c1 + " removed in", milliseconds(30000), 4000000);
  ASSERT_OK(removed);
  const std::string& log_after_remove = *removed;
  const size_t lazy = log_after_remove.find("detaching it lazily");
  EXPECT_EQ(lazy, std::string::npos) << log_after_remove.substr(lazy < 300 ? 0 : lazy - 300, 600);
  ASSERT_OK(cri_->StopPod(*pod_id));
  cstatus = cri_->ContainerStatus(*c2);
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED) << "the pod's stop stops its containers";
  // Its containers deleted, the stop's SIGKILL to the holder ended the VM
  // without a guest call (and containerd still had the kill's answer).
  EXPECT_OK(ctrd_->WaitForLog("sandbox " + *pod_id + ": SIGKILL to its pod holder, the pod's last task",
                              milliseconds(10000)))
      << "the holder's kill went to the guest";
  ASSERT_OK(cri_->RemovePod(*pod_id));
  auto pods = cri_->ListPods();
  ASSERT_OK(pods);
  EXPECT_TRUE(pods->empty());
}

// What the kubelet does to a running pod besides start and stop, through
// containerd's CRI: ReopenContainerLog after a log rotation, ExecSync whose
// timeout passes (the exec is killed in the guest), UpdateContainerResources
// (enforced in the guest's cgroup), and a new container in a pod whose only
// container has exited (the VM stays until StopPodSandbox, and the new
// container runs in the same VM).
TEST_F(CriE2eTest, LogReopenExecTimeoutResourceUpdateAndANewContainerInTheSameVm) {
  const v1::PodSandboxConfig pod = Pod("capsule-corners", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  const pid_t vmm = VmmOf(*pod_id);
  ASSERT_GT(vmm, 0);
  auto c1 = StartContainer(*pod_id, pod, "ticker",
                           {"sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done"});
  ASSERT_OK(c1);

  // Log rotation: the kubelet renames the file, then asks for a reopen.
  const std::string log = logs_ + "/ticker.log";
  ASSERT_TRUE(WaitUntil([&] { auto t = ReadFile(log); return t.ok() && t->find("tick-3") != std::string::npos; },
                        milliseconds(20000)));
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  ASSERT_OK(cri_->ReopenContainerLog(*c1));
  EXPECT_TRUE(WaitUntil([&] { auto t = ReadFile(log); return t.ok() && t->find(" stdout F tick-") != std::string::npos; },
                        milliseconds(20000)))
      << "nothing was written to the reopened log";
  const auto rotated = ReadFile(log + ".1");
  ::usleep(600 * 1000);
  EXPECT_EQ(ReadFile(log + ".1").value_or(""), rotated.value_or("-")) << "the rotated log still grows";

  // An exec that outlives CRI's timeout fails, and its process is gone from the guest.
  const auto t0 = std::chrono::steady_clock::now();
  auto slow = cri_->ExecSync(*c1, {"sleep", "37"}, 2);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(slow.ok() && slow->exit_code == 0) << "an exec past its timeout succeeded";
  EXPECT_LT(took, std::chrono::seconds(30)) << "the timeout was not applied";
  EXPECT_TRUE(WaitUntil([&] {
    auto ps = cri_->ExecSync(*c1, {"ps"}, 30);
    return ps.ok() && ps->out.find("sleep 37") == std::string::npos;
  }, milliseconds(15000))) << "the timed-out exec still runs in the guest";

  // UpdateContainerResources reaches the container's cgroup in the guest.
  v1::LinuxContainerResources r;
  r.set_memory_limit_in_bytes(96 << 20);
  r.set_cpu_period(100000);
  r.set_cpu_quota(50000);
  ASSERT_OK(cri_->UpdateContainerResources(*c1, r));
  // The container's own cgroup, wherever the guest put it.
  auto cgroup_file = [&](const std::string& file) {
    return cri_->ExecSync(*c1, {"sh", "-c", "cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/" + file}, 30);
  };
  auto mem = cgroup_file("memory.max");
  ASSERT_OK(mem);
  EXPECT_EQ(mem->out, std::to_string(96 << 20) + "\n") << mem->err;
  auto cpu = cgroup_file("cpu.max");
  ASSERT_OK(cpu);
  EXPECT_EQ(cpu->out, "50000 100000\n") << cpu->err;

  // The pod's only container exits: the pod and its VM stay.
  ASSERT_OK(cri_->StopContainer(*c1, 2));
  auto pstatus = cri_->PodStatus(*pod_id);
  ASSERT_OK(pstatus);
  EXPECT_EQ(pstatus->status().state(), v1::SANDBOX_READY);
  EXPECT_EQ(::kill(vmm, 0), 0) << "the VM went with the pod's last container";
  ASSERT_OK(cri_->RemoveContainer(*c1));
  // A new container (a restart, as the kubelet makes one) runs in the same VM.
  auto c2 = StartContainer(*pod_id, pod, "again", {"sh", "-c", "echo again-in-the-same-vm; exec sleep 600"});
  ASSERT_OK(c2);
  auto hello = cri_->ExecSync(*c2, {"cat", "/proc/1/cmdline"}, 30);
  ASSERT_OK(hello);
  EXPECT_EQ(VmmOf(*pod_id), vmm) << "the new container got another VM";
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

// Mount propagation across the VM. Host -> container (CRI's
// HostToContainer, "rslave"): a filesystem the host mounts under a volume
// after the container started shows up in it, through the share and
// virtio-fs. Container -> host (Bidirectional, "rshared") cannot cross a
// VM: the container is refused, naming the mount.
TEST_F(CriE2eTest, HostMountsReachARunningContainerAndBidirectionalPropagationIsRefused) {
  const std::string vol = ctrd_->dir() + "/propagated";
  ASSERT_OK(MkdirAll(vol));
  // CRI wants a shared source for either propagation (as the kubelet's
  // /var/lib/kubelet is on a systemd host).
  ASSERT_EQ(::mount(vol.c_str(), vol.c_str(), nullptr, MS_BIND, nullptr), 0);
  struct Unmount {
    std::string dir;
    ~Unmount() {
      ::umount2((dir + "/sub").c_str(), MNT_DETACH);
      ::umount2(dir.c_str(), MNT_DETACH);
    }
  } unmount{vol};
  ASSERT_EQ(::mount(nullptr, vol.c_str(), nullptr, MS_SHARED, nullptr), 0);
  ASSERT_OK(MkdirAll(vol + "/sub"));

  const v1::PodSandboxConfig pod = Pod("capsule-propagation", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto with_mount = [&](const char* name, v1::MountPropagation propagation) {
    ContainerOptions c;
    c.name = name;
    c.image = kBusyboxImage;
    c.command = {"sleep", "600"};
    c.log_path = std::string(name) + ".log";
    v1::ContainerConfig config = cri::MakeContainerConfig(c);
    v1::Mount* m = config.add_mounts();
    m->set_container_path("/data");
    m->set_host_path(vol);
    m->set_propagation(propagation);
    return cri_->CreateContainer(*pod_id, pod, config);
  };
  // containerd makes the task (and so the shim sees the spec) at start.
  auto bidi = with_mount("both-ways", v1::PROPAGATION_BIDIRECTIONAL);
  ASSERT_OK(bidi);
  Status bidi_started = cri_->StartContainer(*bidi);
  ASSERT_FALSE(bidi_started.ok()) << "a bidirectional mount was accepted";
  EXPECT_NE(bidi_started.message().find("bidirectional mount propagation"), std::string::npos) << bidi_started.ToString();
  ASSERT_OK(cri_->RemoveContainer(*bidi));

  auto c = with_mount("watcher", v1::PROPAGATION_HOST_TO_CONTAINER);
  ASSERT_OK(c);
  ASSERT_OK(cri_->StartContainer(*c));
  // After the start: a tmpfs mounted on the host under the volume.
  ASSERT_EQ(::mount("tmpfs", (vol + "/sub").c_str(), "tmpfs", 0, "size=1m"), 0);
  ASSERT_OK(WriteFile(vol + "/sub/late.txt", "mounted-after-start\n"));
  std::string seen;
  EXPECT_TRUE(WaitUntil([&] {
    auto r = cri_->ExecSync(*c, {"cat", "/data/sub/late.txt"}, 30);
    seen = r.ok() ? r->out + r->err : r.status().ToString();
    return r.ok() && r->out == "mounted-after-start\n";
  }, milliseconds(15000))) << "the host's later mount did not reach the container: " << seen;
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

// guest.boot_nic off: the pod's NIC is hot-plugged (the path every NIC
// after the first takes, and the first when the boot NIC cannot be used).
class CriHotplugNicE2eTest : public CriE2eTest {
 protected:
  CriHotplugNicE2eTest() { boot_nic_ = false; }
};

TEST_F(CriHotplugNicE2eTest, PodOnAHotpluggedNicSurvivesAContainerdRestart) {
  const v1::PodSandboxConfig pod = Pod("capsule-restart", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  EXPECT_NE(ctrd_->LogTail(8 << 20).find("(hot-plugged NIC)"), std::string::npos) << "the NIC was not hot-plugged";
  auto c1 = StartContainer(*pod_id, pod, "one",
                           {"sh", "-c",
                            fmt::format("mkdir -p /tmp/www; echo hotplugged > /tmp/www/index.html; "
                                        "exec httpd -f -p {} -h /tmp/www",
                                        kHttpPort)});
  ASSERT_OK(c1);
  auto before = cri_->PodStatus(*pod_id);
  ASSERT_OK(before);
  const std::string pod_ip = before->status().network().ip();

  cri_.reset();
  ASSERT_OK(ctrd_->Restart());
  Connect();
  // CRI answers "server is not initialized yet" until it has recovered its
  // state (reloaded the shims); containerd offers no event for that.
  auto pstatus = cri_->PodStatus(*pod_id);
  for (int i = 0; i < 300 && !pstatus.ok() && pstatus.status().message().find("not initialized") != std::string::npos;
       ++i) {
    ::usleep(100 * 1000);
    pstatus = cri_->PodStatus(*pod_id);
  }
  ASSERT_OK(pstatus);
  EXPECT_EQ(pstatus->status().state(), v1::SANDBOX_READY) << "the shim was reconnected";
  auto exec = cri_->ExecSync(*c1, {"echo", "still-here"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->out, "still-here\n");
  // The hot-plugged NIC carries the pod's traffic.
  auto page = HttpGetOnceListening(pod_ip);
  ASSERT_OK(page);
  EXPECT_NE(page->find("hotplugged"), std::string::npos) << *page;

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

// An exec whose binary does not exist (or is missing from the image) fails
// with the agent's error as soon as the agent answers, as with runc: the
// shim once left its Wait blocked, so containerd's clean-up of the exec
// (WithProcessKill) held ExecSync for its own 60 s deadline, and the pod's
// shim then outlived the pod. After the pod is removed nothing is left.
TEST_F(CriE2eTest, AnExecThatCannotStartFailsAtOnceAndThePodLeavesNothing) {
  const v1::PodSandboxConfig pod = Pod("capsule-badexec", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto c1 = StartContainer(*pod_id, pod, "one", {"sleep", "3600"});
  ASSERT_OK(c1);

  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"/no/such/binary"}, std::vector<std::string>{"nosuchcommand", "arg"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto exec = cri_->ExecSync(*c1, cmd, 30);
    const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
    std::cout << "ExecSync " << cmd[0] << " failed after " << took.count() << " ms\n";
    ASSERT_FALSE(exec.ok()) << "exit " << exec->exit_code << ": " << exec->out << exec->err;
    // The agent's own words: "executable file not found in $PATH" for a
    // name, "No such file or directory" for a path, naming it either way.
    const std::string& why = exec.status().message();
    EXPECT_NE(why.find("exec \"" + cmd[0] + "\""), std::string::npos) << why;
    EXPECT_TRUE(why.find("executable file not found") != std::string::npos ||
                why.find("No such file or directory") != std::string::npos)
        << why;
    // containerd's own deadline for the exec's clean-up is 60 s; the
    // agent's answer takes well under a second even under TCG.
    EXPECT_LT(took, std::chrono::seconds(20)) << exec.status().ToString();
  }
  auto exec = cri_->ExecSync(*c1, {"echo", "still-fine"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->out, "still-fine\n");

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
  EXPECT_TRUE(LeaksAfterExit().empty()) << "the pod's shim, VM or mounts outlived it";
}

// hostNetwork, hostPID and hostIPC cannot be given to a pod in a VM: such a
// pod is refused at RunPodSandbox, saying why and what to use instead, and
// nothing of it is left (no VM was booted, the shim exits).
TEST_F(CriE2eTest, APodAskingForAHostNamespaceIsRefusedAndLeavesNothing) {
  struct Case {
    const char* name;
    const char* field;
    v1::PodSandboxConfig config;
  };
  std::vector<Case> cases;
  cases.push_back({"host-net", "hostNetwork: true", Pod("capsule-hostnet", v1::NODE)});
  cases.push_back({"host-ipc", "hostIPC: true", Pod("capsule-hostipc", v1::POD)});
  cases.back().config.mutable_linux()->mutable_security_context()->mutable_namespace_options()->set_ipc(v1::NODE);
  cases.push_back({"host-pid", "hostPID: true", Pod("capsule-hostpid", v1::POD)});
  cases.back().config.mutable_linux()->mutable_security_context()->mutable_namespace_options()->set_pid(v1::NODE);
  for (const Case& c : cases) {
    auto id = cri_->RunPod(c.config, "capsule");
    ASSERT_FALSE(id.ok()) << c.name << " was not refused";
    EXPECT_NE(id.status().message().find(c.field), std::string::npos) << id.status().ToString();
    EXPECT_NE(id.status().message().find("runc RuntimeClass"), std::string::npos) << id.status().ToString();
    auto pods = cri_->ListPods();
    ASSERT_OK(pods);
    for (const auto& p : *pods) pods_.push_back(p.id());
  }
  EXPECT_EQ(ctrd_->LogTail(2000000).find("booting VM"), std::string::npos) << "no VM is booted for a refused pod";
  EXPECT_TRUE(LeaksAfterExit().empty());
}

// A shim told to stop (SIGTERM, as a node drain or an operator would) stops
// its VM and exits; containerd then sees the pod's task gone, and the pod
// can still be stopped and removed cleanly.
TEST_F(CriE2eTest, ASigtermedShimStopsItsVmAndExits) {
  const v1::PodSandboxConfig pod = Pod("capsule-sigterm", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto c1 = StartContainer(*pod_id, pod, "one", {"sleep", "3600"});
  ASSERT_OK(c1);
  // An exec that could not start once left a Wait blocked for ever, and the
  // shim then ignored SIGTERM.
  ASSERT_FALSE(cri_->ExecSync(*c1, {"/no/such/binary"}, 30).ok());
  const pid_t shim = ShimOf(*pod_id);
  ASSERT_GT(shim, 0) << "no shim daemon for pod " << *pod_id;
  ASSERT_EQ(::kill(shim, SIGTERM), 0);
  bool gone = false;
  for (int i = 0; i < 600 && !gone; ++i) {  // 60 s at most; the VM's stop has a 2 s grace
    gone = ::kill(shim, 0) != 0 && errno == ESRCH;
    if (!gone) ::usleep(100 * 1000);
  }
  ASSERT_TRUE(gone) << "the shim ignored SIGTERM";
  EXPECT_TRUE(E2eEnv::Processes({env_->state_dir()}).empty()) << "its QEMU, virtiofsd or vsock back end lives on";
  auto cstatus = cri_->ContainerStatus(*c1);
  for (int i = 0; i < 100 && cstatus.ok() && cstatus->status().state() == v1::CONTAINER_RUNNING; ++i) {
    ::usleep(100 * 1000);
    cstatus = cri_->ContainerStatus(*c1);
  }
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED) << "containerd saw the task end";
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

// The VMM dies under a running pod (the host's OOM killer, a QEMU crash,
// kill -9): every container of the pod is reported exited, the pod is not
// ready, and it still stops and is removed, leaving nothing behind.
TEST_F(CriE2eTest, AKilledVmmEndsEveryContainerAndThePodIsRemovedCleanly) {
  const v1::PodSandboxConfig pod = Pod("capsule-vmmkill", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  std::vector<std::string> containers;
  for (const char* name : {"one", "two"}) {
    auto c = StartContainer(*pod_id, pod, name, {"sleep", "3600"});
    ASSERT_OK(c);
    containers.push_back(*c);
  }
  const pid_t vmm = VmmOf(*pod_id);
  ASSERT_GT(vmm, 0);
  ASSERT_NE(ReadFile("/proc/" + std::to_string(vmm) + "/cmdline").value_or("").find("qemu-system"),
            std::string::npos)
      << "pid " << vmm << " is not the pod's QEMU";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(vmm, SIGKILL), 0);

  // A bound for a hang, not a speed check (the bench measures speed).
  const auto deadline = t0 + std::chrono::seconds(60);
  for (const std::string& cid : containers) {
    auto st = cri_->ContainerStatus(cid);
    while (st.ok() && st->status().state() != v1::CONTAINER_EXITED && std::chrono::steady_clock::now() < deadline) {
      ::usleep(100 * 1000);
      st = cri_->ContainerStatus(cid);
    }
    ASSERT_OK(st);
    EXPECT_EQ(st->status().state(), v1::CONTAINER_EXITED) << cid << " still runs after its VM died";
    EXPECT_NE(st->status().exit_code(), 0) << cid << " reported a clean exit although its VM was killed";
  }
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "containers reported exited " << took.count() << " ms after the VMM's SIGKILL\n";
  auto ps = cri_->PodStatus(*pod_id, false);
  while (ps.ok() && ps->status().state() != v1::SANDBOX_NOTREADY && std::chrono::steady_clock::now() < deadline) {
    ::usleep(100 * 1000);
    ps = cri_->PodStatus(*pod_id, false);
  }
  ASSERT_OK(ps);
  EXPECT_EQ(ps->status().state(), v1::SANDBOX_NOTREADY);
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
  EXPECT_TRUE(LeaksAfterExit().empty()) << "the pod's shim, VM daemons, mounts or taps outlived it";
}

}  // namespace
}  // namespace capsule::testing
